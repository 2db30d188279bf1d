"""The floor: the same FastAPI on the same uvicorn (one process, httptools and uvloop, the
same garbage-collector tuning as `serve`, FastAPI's OpenTelemetry off as in the app)
answering from the raw asyncpg statements the app's hot paths run, minus the app. Every
ratio in the report is to it, measured in the same run on the same data, with the same
requests (path shape, headers, bodies).

What the floor keeps (what any server answering these requests has to do):

* the bearer key resolved to its tenant, cached per process as the app does (sha256 of the
  key, then a dict: one `api_keys` lookup per key per process);
* the request body parsed (orjson) and the answer serialised (orjson);
* the app's own statements, taken from the app at run time (so the floor follows them):
  the context build's one read (`app.memory.repository._read_sql("context")`: the session,
  its memory state, L2, the L1 window and the promoted messages, in one round trip) and
  the append's one statement (`app.messages.repository._APPEND`: next seqs under the
  session's row lock, the rows with `to_tsvector` into the GIN-indexed `messages` table,
  the counters and the pressure row, autocommitted);
* the app pool's connection settings (`plan_cache_mode=force_generic_plan`, `jit=off`,
  json/jsonb in the binary format, no reset query on release: `app.core.pg`).

What it leaves out (the app): validation, the acting agent and visibility checks, the
memory policy (fit, stand-ins, tool-call pairing, truncation), token counting (a constant
here), rendering, the manifest hook, the compression trigger, metrics and the error
envelope.

* POST /floor/sessions/{id}/context: the read, then the session's summaries and the L1
  rows it read as one orjson document.
* POST /floor/sessions/{id}/messages: the append statement for the request's messages.

The previous floor (before issue 39) is kept beside it for comparison, under
/floor/simple/...: two queries on a pool with asyncpg's reset query on release, stdlib
json, no auth; a BEGIN / UPDATE / INSERT / COMMIT append (four round trips where the app
runs one statement). It is not a goal's floor any more.

* POST /floor/search: the two statements a search runs (unchanged; on the pool with
  asyncpg's defaults, as before).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

DSN = os.environ["BENCH_FLOOR_DSN"]
POOL = int(os.environ.get("BENCH_FLOOR_POOL", "20"))
JSONB_VERSION = b"\x01"


def app_statement(module: str, name: str, *args: Any) -> str:
    """An SQL statement of the app (a constant, or a function's result with `args`), read at
    start: the floor runs what the app runs. Fails loudly when the app moved it."""
    import importlib

    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(
            f"bench/floor_app.py: the app's statement {module}.{name} is gone; point the "
            "floor at the statement the hot path runs now"
        ) from exc
    return value(*args) if callable(value) else value


READ_SQL = app_statement("app.memory.repository", "_read_sql", "context")
APPEND_SQL = app_statement("app.messages.repository", "_APPEND")
# the field names of the read's nested rows (JSON arrays in this order)
from app.models.memory_summary import SummaryRow  # noqa: E402
from app.models.message import StoredMessage  # noqa: E402

MESSAGE_FIELDS = StoredMessage._fields[:-1]
SUMMARY_FIELDS = SummaryRow._fields
KEY_SQL = "SELECT tenant_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL"


def _text_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


async def _init(conn: asyncpg.Connection) -> None:
    # as app.core.pg: JSON parameters as JSON text, results in the binary format; decoded by
    # orjson (without the app's guard for integers beyond 64 bits)
    await conn.set_type_codec(
        "json", encoder=_text_bytes, decoder=orjson.loads, schema="pg_catalog", format="binary"
    )
    await conn.set_type_codec(
        "jsonb",
        encoder=lambda v: JSONB_VERSION + _text_bytes(v),
        decoder=lambda b: orjson.loads(b[1:]),
        schema="pg_catalog",
        format="binary",
    )


async def _keep(conn: asyncpg.Connection) -> None:
    """No reset query on release (the app's pool: nothing leaves session state behind)."""


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.pool = await asyncpg.create_pool(
        DSN,
        min_size=4,
        max_size=POOL,
        init=_init,
        reset=_keep,
        server_settings={"plan_cache_mode": "force_generic_plan", "jit": "off"},
    )
    # the legacy floor's pool: asyncpg's defaults (reset query on release, text JSON)
    app.state.simple_pool = await asyncpg.create_pool(DSN, min_size=1, max_size=POOL)
    app.state.keys = {}
    # `serve`'s garbage-collector tuning (app.core.heap): freeze what startup left, young
    # collections every 20,000 allocations
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)
    yield
    await app.state.pool.close()
    await app.state.simple_pool.close()


# as the app is configured by default (`LOOM_OTEL=false`): FastAPI's native OpenTelemetry off
app = FastAPI(lifespan=lifespan, telemetry={"tracing": False, "metrics": False, "logs": False})


async def tenant_of(request: Request, conn: asyncpg.Connection) -> uuid.UUID:
    """The tenant of the request's bearer key, cached per process (one lookup per key)."""
    auth = request.headers.get("authorization", "")
    key_hash = hashlib.sha256(auth.removeprefix("Bearer ").encode()).hexdigest()
    keys: dict[str, uuid.UUID] = request.app.state.keys
    tenant = keys.get(key_hash)
    if tenant is None:
        tenant = await conn.fetchval(KEY_SQL, key_hash)
        if tenant is None:
            raise RuntimeError("floor: unknown key")
        keys[key_hash] = tenant
    return tenant


def _text(content: Any) -> str:
    """Searchable text of a string or a list of blocks (text, tool_use, tool_result)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for b in content or []:
        if b.get("type") == "text":
            parts.append(b.get("text", ""))
        elif b.get("type") == "tool_use":
            parts.append(b.get("name", "") + " " + orjson.dumps(b.get("input", {})).decode())
        elif b.get("type") == "tool_result":
            parts.append(_text(b.get("content")))
    return "\n".join(p for p in parts if p)


@app.post("/floor/sessions/{session_id}/context")
async def context(session_id: uuid.UUID, request: Request) -> Response:
    """The context build's read (one statement), then what it read as one document."""
    orjson.loads(await request.body() or b"{}")
    async with request.app.state.pool.acquire() as conn:
        tenant = await tenant_of(request, conn)
        row = await conn.fetchrow(READ_SQL, tenant, session_id)
    if row is None:
        return Response(b'{"error":"not found"}', status_code=404)
    body = {
        "session_id": str(row["id"]),
        "summaries": [dict(zip(SUMMARY_FIELDS, s, strict=False)) for s in row["l2"]],
        "messages": [
            dict(zip(MESSAGE_FIELDS, m, strict=False)) for m in [*row["promoted"], *row["l1"]]
        ],
    }
    return Response(orjson.dumps(body), media_type="application/json")


@app.post("/floor/sessions/{session_id}/messages")
async def append(session_id: uuid.UUID, request: Request) -> Response:
    """The append's one statement (autocommitted), token counts and priors constants."""
    msgs = orjson.loads(await request.body())["messages"]
    now = datetime.now(UTC)
    n = len(msgs)
    async with request.app.state.pool.acquire() as conn:
        tenant = await tenant_of(request, conn)
        row = await conn.fetchrow(
            APPEND_SQL,
            tenant,
            session_id,
            n,
            10 * n,
            None,
            [m["role"] for m in msgs],
            [orjson.dumps(m["content"]) for m in msgs],
            [None] * n,
            [None] * n,
            [False] * n,
            [None] * n,
            [_text(m["content"]) for m in msgs],
            [10] * n,
            [b"{}"] * n,
            [now] * n,
            [0.0] * n,  # the priors (app.messages.prior): a constant too, so the ratio
            [False] * n,  # to the API's append carries their cost
            0.0,
        )
    if row is None:
        return Response(b'{"error":"not found"}', status_code=404)
    return Response(
        orjson.dumps({"inserted": row["inserted"]}),
        media_type="application/json",
        status_code=201,
    )


# --- the previous floor (before issue 39), for comparison only -------------------------------
_NEXT_SEQ = """
UPDATE sessions SET last_seq = last_seq + $2 WHERE id = $1
RETURNING last_seq, tenant_id, (SELECT text_search_config FROM tenants t
                                WHERE t.id = sessions.tenant_id)
"""
_INSERT = """
INSERT INTO messages (session_id, seq, tenant_id, role, content, text, token_count,
                      search_vector)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, to_tsvector($8::regconfig, $6))
"""


@app.get("/floor/simple/sessions/{session_id}")
async def simple_read(session_id: uuid.UUID, request: Request) -> Response:
    """The session row, then its last 10 messages (two queries), stdlib json."""
    async with request.app.state.simple_pool.acquire() as conn:
        s = await conn.fetchrow(
            "select id, agent_id, config, last_seq from sessions where id = $1", session_id
        )
        msgs = await conn.fetch(
            "select seq, role, content, token_count from messages "
            "where session_id = $1 order by seq desc limit 10",
            session_id,
        )
    body = {
        "id": str(s["id"]),
        "agent_id": s["agent_id"],
        "config": s["config"],
        "messages": [dict(m) for m in reversed(msgs)],
    }
    return Response(json.dumps(body, default=str), media_type="application/json")


@app.post("/floor/simple/sessions/{session_id}/messages")
async def simple_append(session_id: uuid.UUID, request: Request) -> Response:
    """BEGIN, next seq(s), INSERT, COMMIT (stdlib json)."""
    msgs = (await request.json())["messages"]
    async with request.app.state.simple_pool.acquire() as conn, conn.transaction():
        last, tenant, cfg = await conn.fetchrow(_NEXT_SEQ, session_id, len(msgs))
        first = last - len(msgs) + 1
        rows = [
            (
                session_id,
                first + i,
                tenant,
                m["role"],
                json.dumps(m["content"]),
                _text(m["content"]),
                10,
                cfg,
            )
            for i, m in enumerate(msgs)
        ]
        if len(rows) == 1:
            await conn.execute(_INSERT, *rows[0])
        else:
            await conn.executemany(_INSERT, rows)
    return Response(json.dumps({"last_seq": last}), media_type="application/json", status_code=201)


# --- search: the statements a search runs (app/search/repository.py), raw ----------------


@app.post("/floor/search")
async def search(request: Request) -> Response:
    """The search's SQL, as the app runs it without rerank (one transaction with the app's
    planner settings: the scope's N / total length / n(t) and the query's lexemes, then
    the seeds' probe when it may prune, then the ranking's top 50 with the first 10 rows
    whole), on a raw asyncpg connection; the body
    names tenant_id, scope (session, agent, tenant), session_id / agent_id and the query
    text (no normalisation), and optionally the conversation window and weight (default 2
    and 2.0, as the app; 0 and 0: plain BM25)."""
    from app.search import repository as repo
    from app.search.bm25 import BM25Params, WindowParams
    from app.search.scope import SearchScope

    b = await request.json()
    tid = uuid.UUID(b["tenant_id"])
    sid = uuid.UUID(b["session_id"]) if b.get("session_id") else None
    scope = SearchScope(tid, sid, b.get("agent_id"))
    windows = WindowParams(int(b.get("window", 2)), float(b.get("weight", 2.0)))
    async with request.app.state.simple_pool.acquire() as conn, conn.transaction():
        routed = await repo.custom_plans(conn, scope)
        lexemes, stats = await repo.prepare(conn, scope, b["query"])
        hits = await repo.bm25_top(
            conn, scope, lexemes, stats, BM25Params(), 50, 10, windows=windows, routed=routed
        )
    rows = [
        {"session_id": h.session_id, "seq": h.seq, "score": h.score, "preview": h.preview}
        for h in hits
    ]
    body = {"results": [dict(r) for r in rows[:10]], "candidates": len(rows)}
    return Response(json.dumps(body, default=str), media_type="application/json")

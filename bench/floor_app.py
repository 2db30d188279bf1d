"""The floor: the same HTTP stack (FastAPI on uvicorn, one process) answering from the raw
asyncpg queries an operation needs, with no auth, validation or domain logic. Every ratio
in the report is to it, measured in the same run on the same data.

* GET  /floor/sessions/{id}: the session row, then its last 10 messages (two queries on
  one pooled connection): the floor of a context build.
* POST /floor/sessions/{id}/messages: BEGIN; take the next seq(s) (UPDATE sessions ...
  RETURNING, which also row-locks the session and reads the tenant's text search config);
  INSERT the message(s) with their tsvector (one INSERT for one message, executemany for a
  batch); COMMIT. Token counts are a constant: counting is domain work.
"""

import json
import os
import uuid
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.responses import Response

DSN = os.environ["BENCH_FLOOR_DSN"]
POOL = int(os.environ.get("BENCH_FLOOR_POOL", "20"))

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


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.pool = await asyncpg.create_pool(DSN, min_size=4, max_size=POOL)
    yield
    await app.state.pool.close()


app = FastAPI(lifespan=lifespan)


def _text(content: Any) -> str:
    """Searchable text of a string or a list of blocks (text, tool_use, tool_result)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for b in content or []:
        if b.get("type") == "text":
            parts.append(b.get("text", ""))
        elif b.get("type") == "tool_use":
            parts.append(b.get("name", "") + " " + json.dumps(b.get("input", {})))
        elif b.get("type") == "tool_result":
            parts.append(_text(b.get("content")))
    return "\n".join(p for p in parts if p)


@app.get("/floor/sessions/{session_id}")
async def read_session(session_id: uuid.UUID, request: Request) -> Response:
    """A session row and its last 10 messages (the spec's reference floor)."""
    async with request.app.state.pool.acquire() as conn:
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


@app.post("/floor/sessions/{session_id}/messages")
async def append(session_id: uuid.UUID, request: Request) -> Response:
    """BEGIN, next seq(s), INSERT, COMMIT."""
    msgs = (await request.json())["messages"]
    async with request.app.state.pool.acquire() as conn, conn.transaction():
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


# --- search: the two statements a search runs (app/search/repository.py), raw ------------
_SQL_CACHE: dict[str, tuple[str, list[str]]] = {}


def _search_sql(
    kind: str, window: int, weight: float, routed: bool
) -> tuple[tuple[str, list[str]], tuple[str, list[str]]]:
    from app.core.pg import positional
    from app.search import repository as repo
    from app.search.bm25 import WindowParams

    if kind not in _SQL_CACHE:
        _SQL_CACHE[kind] = positional(
            repo._STATS_SQL.format(sessions=repo._SESSIONS_IN_SCOPE[kind])
        )
    return _SQL_CACHE[kind], repo._bm25_statement(kind, WindowParams(window, weight), routed)


@app.post("/floor/search")
async def search(request: Request) -> Response:
    """The search's SQL, as the app runs it without rerank (one transaction with the app's
    planner settings: the scope's N / total length and the query's lexemes, then the
    ranking's top 50 with the first 10 rows whole), on a raw asyncpg connection; the body
    names tenant_id, scope (session, agent, tenant), session_id / agent_id and the query
    text (no normalisation), and optionally the conversation window and weight (default 2
    and 2.0, as the app; 0 and 0: plain BM25)."""
    from app.search import repository as repo
    from app.search.bm25 import BM25Params
    from app.search.scope import SearchScope

    b = await request.json()
    kind = b["scope"]
    p: dict[str, Any] = {
        "tenant_id": uuid.UUID(b["tenant_id"]),
        "session_id": uuid.UUID(b["session_id"]) if b.get("session_id") else None,
        "agent_id": b.get("agent_id"),
        "refresh_rows": 1,
        "text": b["query"],
    }
    scope = SearchScope(p["tenant_id"], p["session_id"], p["agent_id"])
    async with request.app.state.pool.acquire() as conn, conn.transaction():
        routed = await repo.custom_plans(conn, scope)
        (stats_sql, stats_names), (bm_sql, bm_names) = _search_sql(
            kind, int(b.get("window", 2)), float(b.get("weight", 2.0)), routed
        )
        n_docs, total, lexemes = await conn.fetchrow(stats_sql, *[p[n] for n in stats_names])
        lexemes = sorted(set(lexemes or []))
        rows = []
        if lexemes and n_docs:
            await repo.hash_joins(conn)
            bp = repo.bm25_params(
                scope, lexemes, repo.ScopeStats(n_docs, total), BM25Params(), 50, 10
            )
            rows = await conn.fetch(bm_sql, *[bp[n] for n in bm_names])
    body = {"results": [dict(r) for r in rows[:10]], "candidates": len(rows)}
    return Response(json.dumps(body, default=str), media_type="application/json")

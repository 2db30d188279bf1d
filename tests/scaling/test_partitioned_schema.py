"""Tenant as the distribution key (migration 0013): the keys, the data through the migration
both ways, and the hot paths on a hash-partitioned schema reading one partition each.

Each test has its own database (the run's database may be plain or partitioned)."""

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from app.core.config import Settings
from app.core.partitions import REFERENCE_TABLES, TENANT_TABLES
from app.launcher.migrate import downgrade, upgrade
from app.main import create_app
from tests.support import tenant_audit
from tests.support.databases import dsn_of, fresh_database, url_of

PARTITIONS = 8
# the tables of the revision before the new keys (0012), which the test migrates down to
BEFORE = [
    t
    for t in TENANT_TABLES
    if t
    not in (
        "memory_item_versions",
        "fact_extractions",
        "erasures",
        "context_manifests",
        # no LLM here: no calls, no budgets
        "llm_usage",
        "tenant_budgets",
        # derived from messages by the searches, since 0024 (not in 0012)
        "search_terms",
    )
]


@pytest.fixture
def fresh_db() -> Iterator[tuple[str, str]]:
    """(SQLAlchemy URL, libpq DSN) of an empty database, dropped afterwards."""
    with fresh_database("loom_scaling") as name:
        yield url_of(name), dsn_of(name)


@asynccontextmanager
async def service(url: str, settings: Settings, **extra: Any) -> AsyncIterator[tuple[Any, str]]:
    """The app on `url` (lifespan run), with its admin key."""
    admin = "lm_scaling_" + secrets.token_urlsafe(16)
    app = create_app(
        Settings(
            DATABASE_URL=url,
            REDIS_URL=settings.redis_url,
            LOOM_ADMIN_KEY=SecretStr(admin),
            LOOM_QUEUE_NAME=settings.queue_name,
            LOOM_DATA_DIR=Path("/tmp/loom-test-data"),
            **extra,
        )
    )
    async with app.router.lifespan_context(app):
        yield app, admin


def _client(app: Any, key: str, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://t",
        headers={"Authorization": f"Bearer {key}", **headers},
        timeout=30,
    )


async def _tenant(app: Any, admin: str) -> httpx.AsyncClient:
    async with _client(app, admin) as c:
        tid = (await c.post("/v1/tenants", json={"name": f"s-{secrets.token_hex(4)}"})).json()["id"]
        key = (await c.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})).json()
    return _client(app, key["secret"], **{"X-Agent-Id": "agent-1"})


async def _populate(c: httpx.AsyncClient) -> dict[str, Any]:
    """A tenant's worth of every kind of row: sessions, messages, L2 summaries and a
    snapshot, compression job, idempotency record, search statistics, shared memory with a
    reference held by a message, memory items, a profile, learned artifacts."""
    r = await c.put("/v1/agents/agent-1/profile", json={"system_prompt": "You keep logs."})
    assert r.status_code in (200, 201), r.text
    sid = (
        await c.post(
            "/v1/sessions", json={"config": {"max_context_tokens": 2000, "max_l2_tokens": 150}}
        )
    ).json()["id"]
    for round_ in range(3):
        batch = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"round {round_} line {i}: the lighthouse keeper logs ships " * 6,
            }
            for i in range(16)
        ]
        r = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": batch},
            headers={"Idempotency-Key": f"k-{round_}"},
        )
        assert r.status_code == 201, r.text
        r = await c.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
        assert r.status_code in (200, 202), r.text
    put = await c.put("/v1/shared-memory/global/doc", json={"value": {"text": "the keeper's log"}})
    assert put.status_code == 201, put.text
    big = "ship sighted off the rocks; " * 5000  # over the offload threshold: a reference
    r = await c.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "tu_log", "name": "read_log", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "tu_log", "content": big}],
                },
            ]
        },
    )
    assert r.status_code == 201, r.text
    ref = r.json()["messages"][1]["metadata"]["data_ref"]["id"]
    for scope in ("global", "project/p1"):
        r = await c.post(
            "/v1/memory-items",
            json={"scope": scope, "kind": "decision", "text": f"billing on PostgreSQL ({scope})"},
        )
        assert r.status_code == 201, r.text
    r = await c.put("/v1/agents/agent-1/learned", json={"signatures": {"a": "b"}})
    assert r.status_code in (200, 201), r.text
    assert (
        await c.post(f"/v1/sessions/{sid}/search", json={"query": "lighthouse"})
    ).status_code == 200
    return {"sid": sid, "ref": ref}


async def _context(c: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await c.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})
    assert r.status_code == 200, r.text
    return {k: v for k, v in r.json().items() if k != "context_id"}  # one per build


async def _counts(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        return {
            t: await conn.fetchval(f"SELECT count(*) FROM {t}")
            for t in (*BEFORE, *REFERENCE_TABLES)
        }
    finally:
        await conn.close()


async def _keys(dsn: str) -> dict[str, str]:
    """Every primary key, unique constraint and foreign key of the tenant tables."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT conrelid::regclass::text AS t, conname, pg_get_constraintdef(oid) AS d "
            "FROM pg_constraint WHERE contype IN ('p', 'u', 'f') AND conparentid = 0 "
            "AND conrelid::regclass::text = ANY($1) ORDER BY 1, 2",
            list(TENANT_TABLES),
        )
        return {f"{r['t']}.{r['conname']}": r["d"] for r in rows}
    finally:
        await conn.close()


async def test_migration_keeps_every_row_and_the_context_both_ways(fresh_db, settings) -> None:
    url, dsn = fresh_db
    await asyncio.to_thread(upgrade, url, partitions=0)
    async with service(url, settings) as (app, admin):
        async with await _tenant(app, admin) as c:
            sid = (await _populate(c))["sid"]
            before = await _context(c, sid)
            key = c.headers["Authorization"]
    counts = await _counts(dsn)
    assert all(counts[t] > 0 for t in BEFORE if t != "search_stats"), counts
    keys = await _keys(dsn)
    for name, definition in keys.items():
        if definition.startswith(("PRIMARY KEY", "UNIQUE")):
            assert definition.split("(", 1)[1].startswith("tenant_id"), (name, definition)
        elif "REFERENCES tenants" not in definition:
            assert definition.startswith("FOREIGN KEY (tenant_id, "), (name, definition)
            assert "(tenant_id, " in definition.split("REFERENCES", 1)[1], (name, definition)

    # down to the previous head, then up again into 8 partitions, down and up (plain)
    for revision, partitions in (
        ("0012_tenant_names", None),
        ("heads", PARTITIONS),
        ("0012_tenant_names", None),
        ("heads", 0),
    ):
        if revision == "heads":
            await asyncio.to_thread(upgrade, url, partitions=partitions)
        else:
            await asyncio.to_thread(downgrade, url, revision)
        now = await _counts(dsn)
        # the search statistics are derived: an upgrade through 0024_search_terms folds
        # them again from the messages (the next search), so they may be gone; all else stays
        assert now.pop("search_stats") <= counts["search_stats"], revision
        assert now == {t: n for t, n in counts.items() if t != "search_stats"}, revision
        if revision == "heads":
            assert await _keys(dsn) == keys
            async with service(url, settings) as (app, _):
                async with _client(app, key.split(" ", 1)[1], **{"X-Agent-Id": "agent-1"}) as again:
                    assert await _context(again, sid) == before


async def test_hot_paths_read_one_partition(fresh_db, settings, capsys) -> None:
    """On 8 partitions with several tenants holding data, each hot-path request's
    statements are planned (with their arguments) against one partition of every
    tenant-owned table they read or write."""
    url, dsn = fresh_db
    await asyncio.to_thread(upgrade, url, partitions=PARTITIONS)
    recorder = tenant_audit.Recorder()
    restore = tenant_audit.install(recorder)
    try:
        # no memory tier: shared-memory reads go to PostgreSQL
        async with service(url, settings, LOOM_SHARED_MEMORY_CACHE_BYTES=0) as (app, admin):
            clients = [await _tenant(app, admin) for _ in range(4)]
            made = [await _populate(c) for c in clients]
            c, sid, ref = clients[0], made[0]["sid"], made[0]["ref"]
            item = (
                await c.post(
                    "/v1/memory-items", json={"scope": "global", "kind": "note", "text": "hot"}
                )
            ).json()
            requests = {
                "append": (
                    "POST",
                    f"/v1/sessions/{sid}/messages",
                    {"messages": [{"role": "user", "content": "one more ship"}]},
                ),
                "context build": ("POST", f"/v1/sessions/{sid}/context", {"format": "anthropic"}),
                "session search": (
                    "POST",
                    f"/v1/sessions/{sid}/search",
                    {"query": "lighthouse ships"},
                ),
                "shared-memory read": ("GET", "/v1/shared-memory/global/doc", None),
                "shared-memory read by reference": ("GET", f"/v1/refs/{ref}", None),
                "memory-item query": (
                    "POST",
                    "/v1/memory-items/query",
                    {"filters": {"kind": "decision"}},
                ),
                "memory-item read": ("GET", f"/v1/memory-items/{item['id']}", None),
            }
            plans: dict[str, list[str]] = {}
            for label, (method, path, body) in requests.items():
                await asyncio.sleep(0.1)  # asyncpg calls query loggers with call_soon
                recorder.seen.clear()
                r = await c.request(method, path, json=body)
                assert r.status_code < 300, (label, r.status_code, r.text)
                await asyncio.sleep(0.1)
                assert recorder.seen, label
                plans[label] = await tenant_audit.explain_one_partition(dsn, recorder)
            for client in clients:
                await client.aclose()
    finally:
        restore()
    with capsys.disabled():
        for label, lines in plans.items():
            print(f"\n--- {label}")
            print("\n".join(lines))

"""The schema on a real Citus cluster (scripts/test-citus: a coordinator and two workers,
`LOOM_TEST_CITUS`): the layout `loom-memory migrate` leaves, tenants' rows on both workers,
the statements each hot route sends (one shard each), later migrations keeping the layout,
and a tenant's shard moved to the other worker while it is written.

The figures (layout, statements per route, the move) are printed for the record
(`pytest -s`) and asserted."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from alembic import command

from app.core.partitions import FAN_OUT, REFERENCE_TABLES, TENANT_TABLES
from app.launcher.migrate import alembic_config, upgrade
from tests.support import citus
from tests.support.api import make_client

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(citus.target() is None, reason="runs in scripts/test-citus"),
]


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def _layout(dsn: str) -> dict[str, tuple[str, int]]:
    """table -> (kind, colocation id) from pg_dist_partition."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT logicalrelid::regclass::text AS t, partmethod::text AS partmethod, "
            "repmodel::text AS repmodel, colocationid "
            "FROM pg_dist_partition"
        )
    finally:
        await conn.close()
    kinds = {"h": "hash", "n": "reference"}
    return {
        r["t"]: (
            kinds[r["partmethod"]] if r["repmodel"] != "s" or r["partmethod"] == "h" else "local",
            r["colocationid"],
        )
        for r in rows
    }


def _assert_distributed(layout: dict[str, tuple[str, int]], tables: list[str]) -> None:
    anchor = layout["sessions"]
    assert anchor[0] == "hash"
    for t in tables:
        assert layout.get(t) == ("hash", anchor[1]), (t, layout.get(t))
    for t in REFERENCE_TABLES:
        assert layout[t][0] == "reference", (t, layout[t])


async def test_migrate_distributes_every_tenant_table_co_located(test_database: str) -> None:
    layout = await _layout(_dsn(test_database))
    print("\npg_dist_partition after loom-memory migrate:")
    for t, (kind, colocation) in sorted(layout.items(), key=lambda x: (x[1], x[0])):
        print(f"  {t:28} {kind:9} colocation {colocation}")
    _assert_distributed(layout, list(TENANT_TABLES))
    conn = await asyncpg.connect(_dsn(test_database))
    try:
        owned = await conn.fetch(
            "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
            "AND a.attname = 'tenant_id' WHERE c.relnamespace = 'public'::regnamespace "
            "AND c.relkind IN ('r', 'p') AND NOT relation_is_a_known_shard(c.oid)"
        )
    finally:
        await conn.close()
    # every table with a tenant_id (whatever migrations added) is a Citus table
    assert {r[0] for r in owned} <= set(layout)


async def _tenant(admin: httpx.AsyncClient, app: Any) -> tuple[str, httpx.AsyncClient]:
    r = await admin.post("/v1/tenants", json={"name": f"ct-{secrets.token_hex(4)}"})
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    r = await admin.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
    assert r.status_code == 201, r.text
    return tid, make_client(app, r.json()["secret"], {"X-Agent-Id": "agent-1"})


async def _placement(dsn: str, table: str, tenant_id: str) -> tuple[int, int, str]:
    """(shard id, worker port, shard table) of `tenant_id`'s rows of `table`."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT s.shardid, n.nodeport, shard_name(CAST($1 AS regclass), s.shardid) "
            "FROM (SELECT get_shard_id_for_distribution_column(CAST($1 AS regclass), "
            "CAST($2 AS uuid)) AS shardid) s "
            "JOIN pg_dist_placement p ON p.shardid = s.shardid "
            "JOIN pg_dist_node n ON n.groupid = p.groupid",
            table,
            tenant_id,
        )
    finally:
        await conn.close()
    return int(row[0]), int(row[1]), str(row[2])


async def test_rows_of_tenants_land_on_both_workers(
    app: Any, admin_client: httpx.AsyncClient, test_database: str
) -> None:
    t = citus.target()
    assert t is not None
    name = test_database.rsplit("/", 1)[1]
    on: dict[int, int] = {}
    for _ in range(8):
        tid, c = await _tenant(admin_client, app)
        async with c:
            sid = (await c.post("/v1/sessions", json={})).json()["id"]
            r = await c.post(
                f"/v1/sessions/{sid}/messages",
                json={"messages": [{"role": "user", "content": "where does this live"}]},
            )
            assert r.status_code == 201, r.text
        _, port, shard = await _placement(_dsn(test_database), "messages", tid)
        # the row is in that worker's shard table (read on the worker itself)
        worker = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{port}/{name}")
        try:
            n = await worker.fetchval(
                f"SELECT count(*) FROM {shard} WHERE tenant_id = $1", uuid.UUID(tid)
            )
        finally:
            await worker.close()
        assert n == 1, (tid, port, shard)
        on[port] = on.get(port, 0) + 1
    print(f"\ntenants per worker port: {on}")
    assert set(on) == set(t.worker_ports), on


# The hot routes, each once, in order; the statements each sent that Citus planned on more
# than one shard are counted from the coordinator's log.
async def _routes(c: httpx.AsyncClient) -> list[tuple[str, Any]]:
    state: dict[str, Any] = {}

    async def create() -> httpx.Response:
        r = await c.post("/v1/sessions", json={"config": {"max_context_tokens": 4000}})
        state["sid"] = r.json()["id"]
        return r

    def s(path: str) -> str:
        return f"/v1/sessions/{state['sid']}{path}"

    batch = [{"role": "user", "content": f"the lighthouse log line {i}"} for i in range(4)]
    return [
        ("POST /v1/sessions", create),
        ("GET /v1/sessions/{id}", lambda: c.get(s(""))),
        ("POST messages (append)", lambda: c.post(s("/messages"), json={"messages": batch})),
        ("GET messages", lambda: c.get(s("/messages"))),
        ("POST context", lambda: c.post(s("/context"), json={"format": "anthropic"})),
        ("POST search (session)", lambda: c.post(s("/search"), json={"query": "lighthouse"})),
        (
            "POST /v1/search (agent)",
            lambda: c.post("/v1/search", json={"query": "lighthouse", "scope": "agent"}),
        ),
        (
            "POST /v1/search (tenant)",
            lambda: c.post("/v1/search", json={"query": "lighthouse", "scope": "tenant"}),
        ),
        ("PUT shared memory", lambda: c.put("/v1/shared-memory/global/k", json={"value": 1})),
        ("GET shared memory", lambda: c.get("/v1/shared-memory/global/k")),
        (
            "POST memory item",
            lambda: c.post(
                "/v1/memory-items", json={"scope": "global", "kind": "decision", "text": "x"}
            ),
        ),
        ("POST memory items query", lambda: c.post("/v1/memory-items/query", json={})),
        ("GET sessions (list)", lambda: c.get("/v1/sessions")),
        ("POST compress", lambda: c.post(s("/memory/compress"), params={"wait": "true"})),
        ("DELETE session", lambda: c.delete(s(""))),
    ]


async def test_every_hot_route_runs_on_one_shard(
    app: Any, admin_client: httpx.AsyncClient, test_database: str
) -> None:
    name = test_database.rsplit("/", 1)[1]
    log = citus.coordinator_log()
    _, c = await _tenant(admin_client, app)
    counts: list[tuple[str, int, int]] = []
    async with c:
        for route, call in await _routes(c):
            start = log.stat().st_size
            r = await call()
            assert r.status_code < 300, (route, r.status_code, r.text)
            await asyncio.sleep(0.05)  # the server's log line written
            wide = citus.multi_shard_statements(log, name, start=start)
            counts.append((route, len([w for w in wide if FAN_OUT not in w]), len(wide)))
    # the log shows a multi-shard statement of the app's (a FAN_OUT one, which the run's
    # check lets through): what the counts above read would have caught one
    canary = await asyncpg.connect(
        _dsn(test_database), server_settings={"application_name": "loom-memory"}
    )
    start = log.stat().st_size
    try:
        await canary.fetchval(f"SELECT {FAN_OUT} count(*) FROM sessions")
    finally:
        await canary.close()
    await asyncio.sleep(0.05)
    assert [w for w in citus.multi_shard_statements(log, name, start=start) if FAN_OUT in w]
    print("\nmulti-shard statements per route (outside FAN_OUT / all):")
    for route, outside, total in counts:
        print(f"  {route:28} {outside} / {total}")
    assert all(outside == 0 for _, outside, _ in counts), counts


@pytest.fixture
def citus_db() -> Iterator[str]:
    with citus.database("loom_citus_mig") as dsn:
        yield dsn


def test_later_migrations_keep_the_layout(citus_db: str) -> None:
    """Migrated to 0016 the schema is distributed; the migrations after it add a table
    with keys to `sessions` and `tenants` (context_manifests), change a column's type, add
    columns and checks, and leave every table distributed. (Older migrations update rows
    with functions Citus refuses in a distributed UPDATE; a deployment distributes at the
    head, and later migrations must keep to what Citus runs: docs/scaling.md.)"""
    url = citus_db.replace("postgresql://", "postgresql+asyncpg://", 1)
    command.upgrade(alembic_config(url), "0016_users")
    early = asyncio.run(_layout(citus_db))
    assert "context_manifests" not in early
    _assert_distributed(early, [t for t in early if t not in REFERENCE_TABLES])
    upgrade(url, partitions=0)
    late = asyncio.run(_layout(citus_db))
    _assert_distributed(late, list(TENANT_TABLES))
    upgrade(url, partitions=0)  # idempotent: nothing left to do
    assert asyncio.run(_layout(citus_db)) == late


# --- a tenant moved while it is written -------------------------------------------------

WRITERS = 4
CONTEXT_READERS = 2
# each client waits this long between requests (a steady load, not a flood the shared test
# machine's cores could not replicate out of: unpaced, the move after an isolation spent
# 93 s catching up with 3,200 appends)
PACE = 0.02


@pytest.mark.parametrize("isolate", [False, True], ids=["move", "isolate-then-move"])
async def test_tenant_shard_moved_while_written(
    app: Any, admin_client: httpx.AsyncClient, test_database: str, isolate: bool
) -> None:
    """Appends (each acknowledged one must be stored once) and context builds run against
    one tenant while `citus_move_shard_placement` moves its shard group (every co-located
    table) to the other worker by logical replication (`isolate`: first
    `isolate_tenant_to_new_shard` gives the tenant a shard group of its own, then that
    group moves). The split blocks the shard group's writes while it copies
    (`block_writes`): over logical replication, with these writes going on, it waited on
    its replication slot for over 10 minutes and was cancelled. Every answer is 2xx or 503
    with Retry-After."""
    t = citus.target()
    assert t is not None
    dsn = _dsn(test_database)
    tid, c = await _tenant(admin_client, app)
    sessions = [(await c.post("/v1/sessions", json={})).json()["id"] for _ in range(WRITERS)]
    # some history to copy
    for sid in sessions:
        r = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": f"before {i}"} for i in range(50)]},
        )
        assert r.status_code == 201, r.text
    shard, source, _ = await _placement(dsn, "sessions", tid)
    target = next(p for p in t.worker_ports if p != source)
    steps: dict[str, float] = {}

    acked: dict[str, list[str]] = {sid: [] for sid in sessions}
    statuses: dict[int, int] = {}
    slowest = [0.0]
    bad: list[str] = []
    moving = asyncio.Event()
    done = asyncio.Event()

    def seen(r: httpx.Response, took: float) -> bool:
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        slowest[0] = max(slowest[0], took)
        if r.status_code == 503 and r.headers.get("Retry-After"):
            return False
        if r.status_code >= 300:
            bad.append(f"{r.status_code} {r.text[:300]}")
            return False
        return True

    async def writer(sid: str) -> None:
        n, pending, late = 0, False, 0
        # after the end, an unanswered append is sent again until it is: so what is stored
        # must be exactly what was acknowledged
        while not done.is_set() or (pending and late < 50):
            late += done.is_set()
            text = f"during {sid[:8]} {n}"
            key = f"k-{sid[:8]}-{n}"
            started = time.monotonic()
            r = await c.post(
                f"/v1/sessions/{sid}/messages",
                json={"messages": [{"role": "user", "content": text}]},
                headers={"Idempotency-Key": key},
            )
            pending = True
            await asyncio.sleep(PACE)
            if seen(r, time.monotonic() - started):
                acked[sid].append(text)
                n, pending = n + 1, False
            # an unanswered one (503) is sent again with its key: stored once at most

    async def reader(sid: str) -> None:
        while not done.is_set():
            started = time.monotonic()
            r = await c.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})
            seen(r, time.monotonic() - started)
            await asyncio.sleep(PACE)

    async def move() -> float:
        nonlocal shard
        conn = await asyncpg.connect(dsn)
        try:
            moving.set()
            started = time.monotonic()
            if isolate:
                shard = await conn.fetchval(
                    "SELECT isolate_tenant_to_new_shard('sessions', CAST($1 AS uuid), "
                    "cascade_option => 'CASCADE', shard_transfer_mode => 'block_writes')",
                    tid,
                )
                steps["isolate"] = time.monotonic() - started
            moved = time.monotonic()
            await conn.execute(
                "SELECT citus_move_shard_placement($1, '127.0.0.1', $2, '127.0.0.1', $3)",
                shard,
                source,
                target,
            )
            steps["move"] = time.monotonic() - moved
            return time.monotonic() - started
        finally:
            await conn.close()

    tasks = [asyncio.create_task(writer(sid)) for sid in sessions]
    tasks += [asyncio.create_task(reader(sid)) for sid in sessions[:CONTEXT_READERS]]
    await asyncio.sleep(0.5)  # writing before the move starts
    before = sum(len(v) for v in acked.values())
    took = await move()
    during = sum(len(v) for v in acked.values()) - before
    await asyncio.sleep(0.5)  # and after it
    done.set()
    await asyncio.gather(*tasks)

    now_shard, now_on, _ = await _placement(dsn, "sessions", tid)
    assert (now_shard, now_on) == (shard, target), (now_shard, now_on, shard, target)
    if isolate:  # the tenant alone in its shard group now
        conn = await asyncpg.connect(dsn)
        try:
            others = await conn.fetchval(
                "SELECT count(DISTINCT tenant_id) FROM sessions WHERE tenant_id <> $1 "
                "AND get_shard_id_for_distribution_column('sessions', tenant_id) = $2",
                uuid.UUID(tid),
                shard,
            )
        finally:
            await conn.close()
        assert others == 0
    conn = await asyncpg.connect(dsn)
    try:
        for sid in sessions:
            rows = await conn.fetch(
                "SELECT seq, text FROM messages WHERE tenant_id = $1 AND session_id = $2 "
                "ORDER BY seq",
                uuid.UUID(tid),
                uuid.UUID(sid),
            )
            seqs = [r["seq"] for r in rows]
            assert seqs == list(range(1, len(seqs) + 1)), "seqs not gap-free"
            stored = [r["text"] for r in rows if r["text"].startswith("during")]
            # each acknowledged append stored once, nothing else stored
            assert sorted(stored) == sorted(acked[sid]), (sid, len(stored), len(acked[sid]))
    finally:
        await conn.close()
    await c.aclose()
    total = sum(len(v) for v in acked.values())
    how = " + ".join(f"{k} {v:.2f} s" for k, v in steps.items())
    print(
        f"\n{'isolated and ' if isolate else ''}shard {shard} moved :{source} -> :{target} "
        f"in {took:.2f} s ({how}) while written: "
        f"{total} appends acknowledged ({during} during the move), statuses {statuses}, "
        f"slowest answer {slowest[0] * 1000:.0f} ms"
    )
    assert not bad, bad[:5]
    assert during > 0, "nothing was written during the move"

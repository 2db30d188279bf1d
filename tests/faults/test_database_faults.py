"""PostgreSQL faults through the HTTP API: frozen (SIGSTOP, as in a network partition),
stopped and started again (`pg_ctl stop -m fast`), and every app connection terminated
(`pg_terminate_backend`). Never a 500; during the fault 503 `database_unavailable` with
Retry-After within the configured database time; every route 2xx again within 2 s of the
database accepting connections, and /readyz following."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from app.core.config import Settings
from tests.faults.conftest import Api, Result, call, routes
from tests.support.live import PrivatePostgres

pytestmark = pytest.mark.slow

DEFAULTS = Settings()
# the bound every request keeps with the database frozen, the client's whole wait included
# (issue 36): the request's database deadline, and what is left of 5 s for the rest
BOUND = 5.0
assert DEFAULTS.db_request_seconds < BOUND
assert (
    max(
        DEFAULTS.db_statement_timeout_seconds + 0.5,
        DEFAULTS.db_connect_timeout_seconds,
        DEFAULTS.db_pool_timeout_seconds,
    )
    <= DEFAULTS.db_request_seconds
)
READY_BOUND = DEFAULTS.ready_timeout_seconds + 1.0


def _unavailable(r: Result) -> None:
    assert r.status == 503, (r.name, r.status, r.body)
    assert json.loads(r.body)["error"]["code"] in ("database_unavailable", "not_ready"), r.body
    assert "Traceback" not in r.body
    if r.name != "readyz":
        assert r.retry_after is not None and int(r.retry_after) >= 1, r


async def _all_ok(api: Api, within: float) -> float:
    """Seconds until every route answers 2xx (each tried until then)."""
    started = time.monotonic()
    pending = [("readyz", "GET", "/readyz", None), *routes(api.session_id)]
    while pending:
        results = await asyncio.gather(*(call(api.client, *r) for r in pending))
        for r in results:
            assert r.status < 500 or r.status == 503, (r.name, r.status, r.body)
        pending = [p for p, r in zip(pending, results, strict=True) if not 200 <= r.status < 300]
        if pending and time.monotonic() - started > within:
            raise AssertionError(f"still failing after {within}s: {[p[0] for p in pending]}")
        if pending:
            await asyncio.sleep(0.1)
    return time.monotonic() - started


async def test_frozen_database_answers_503_within_the_bound(
    api: Api, private_pg: PrivatePostgres
) -> None:
    await _all_ok(api, 10)
    private_pg.freeze()
    try:
        # concurrently: each route holds its own connection, all on the frozen server
        results = await asyncio.gather(
            *(call(api.client, *r) for r in routes(api.session_id)),
            call(api.client, "readyz", "GET", "/readyz", None),
        )
        # and once more now that the pool's connections are known dead
        again = await asyncio.gather(*(call(api.client, *r) for r in routes(api.session_id)))
    finally:
        private_pg.thaw()
    timings = {r.name: round(r.elapsed, 2) for r in results}
    print(f"frozen PostgreSQL: {timings}; again: { {r.name: round(r.elapsed, 2) for r in again} }")
    for r in [*results, *again]:
        _unavailable(r)
        assert r.elapsed <= (READY_BOUND if r.name == "readyz" else BOUND), (r.name, r.elapsed)
    back = await _all_ok(api, 2)
    print(f"all routes 2xx {back:.2f}s after SIGCONT")


async def _load(api: Api, stop: asyncio.Event, out: list[Result]) -> None:
    """Every route in a loop (one request of each at a time) until `stop`."""

    async def loop(route: tuple[str, str, str, object]) -> None:
        while not stop.is_set():
            out.append(await call(api.client, *route))
            await asyncio.sleep(0.02)

    await asyncio.gather(
        *(loop(r) for r in [("readyz", "GET", "/readyz", None), *routes(api.session_id)])
    )


def _check_recovery(results: list[Result], back_at: float, what: str) -> dict[str, float]:
    """No 500 at any moment; every request started after the database is back + 2 s is
    2xx; returns per route the time from `back_at` to its first 2xx."""
    bad = [r for r in results if r.status >= 500 and r.status != 503]
    assert not bad, [(r.name, r.status, r.body[:200]) for r in bad]
    for r in results:
        if r.status == 503:
            _unavailable(r)
    late = [r for r in results if r.started >= back_at + 2 and not 200 <= r.status < 300]
    assert not late, [(r.name, r.status, round(r.started - back_at, 2)) for r in late]
    first_ok: dict[str, float] = {}
    for r in sorted(results, key=lambda r: r.started + r.elapsed):
        if r.started >= back_at and 200 <= r.status < 300 and r.name not in first_ok:
            first_ok[r.name] = round(r.started + r.elapsed - back_at, 2)
    assert set(first_ok) == {"readyz", *(r[0] for r in routes(""))}, first_ok
    assert max(first_ok.values()) <= 2, first_ok
    failures: dict[str, int] = {}
    for r in results:
        if r.started >= back_at and not 200 <= r.status < 300:
            failures[r.name] = failures.get(r.name, 0) + 1
    print(f"{what}: first 2xx after back {first_ok}; non-2xx after back {failures}")
    return first_ok


async def test_forty_appends_and_builds_on_a_frozen_database_answer_within_5_s(
    api: Api, private_pg: PrivatePostgres
) -> None:
    """40 at once (more than a pool holds): some wait for a connection, some for their
    statement, each answers 503 within 5 s of asking (issue 36: 12 of 40 took 5.5 s)."""
    await _all_ok(api, 10)
    busy = [r for r in routes(api.session_id) if r[0] in ("append", "context")] * 20
    private_pg.freeze()
    try:
        results = await asyncio.gather(*(call(api.client, *r) for r in busy))
    finally:
        private_pg.thaw()
    slowest = max(r.elapsed for r in results)
    print(f"40 on a frozen PostgreSQL: slowest {slowest:.2f} s")
    for r in results:
        _unavailable(r)
        assert r.elapsed <= BOUND, (r.name, r.elapsed)
    await _all_ok(api, 2)


async def test_restart_recovers_without_500(api: Api, private_pg: PrivatePostgres) -> None:
    await _all_ok(api, 10)
    stop = asyncio.Event()
    results: list[Result] = []
    load = asyncio.create_task(_load(api, stop, results))
    try:
        await asyncio.sleep(0.5)
        await asyncio.to_thread(private_pg.stop, "fast")
        await asyncio.sleep(1.5)
        down = [r for r in results if r.started > time.monotonic() - 1.0]
        await asyncio.to_thread(private_pg.start)  # returns once it accepts connections
        back_at = time.monotonic()
        await asyncio.sleep(3)
    finally:
        stop.set()
        await load
    assert any(r.status == 503 for r in down), "the outage was not seen"
    _check_recovery(results, back_at, "pg_ctl stop -m fast + start")


async def test_terminated_connections_recover_without_500(
    api: Api, private_pg: PrivatePostgres
) -> None:
    await _all_ok(api, 10)
    stop = asyncio.Event()
    results: list[Result] = []
    load = asyncio.create_task(_load(api, stop, results))
    try:
        await asyncio.sleep(1)
        killed = 0
        for _ in range(3):  # again and again, mid-request
            killed += await asyncio.to_thread(private_pg.terminate_backends)
            await asyncio.sleep(0.3)
        back_at = time.monotonic()
        await asyncio.sleep(3)
    finally:
        stop.set()
        await load
    assert killed > 0
    _check_recovery(results, back_at, f"pg_terminate_backend x3 ({killed} connections)")


@pytest.mark.parametrize("fault", ["restart", "terminate"])
async def test_first_requests_after_the_database_is_back_succeed(
    api: Api, private_pg: PrivatePostgres, fault: str
) -> None:
    """A quiet pool full of connections the server has closed: the first request of each
    route after the fault already succeeds (the dead connections are never used)."""
    await _all_ok(api, 10)
    for _ in range(3):  # fill the pool with several idle connections
        await asyncio.gather(*(call(api.client, *r) for r in routes(api.session_id) * 2))
    if fault == "restart":
        await asyncio.to_thread(private_pg.stop, "fast")
        await asyncio.to_thread(private_pg.start)
    else:
        assert await asyncio.to_thread(private_pg.terminate_backends) > 0
    await asyncio.sleep(0.1)  # the app's loop reads the closed sockets
    results = []
    order = sorted(routes(api.session_id), key=lambda r: r[0] != "context")  # context first
    for _ in range(3):
        for r in [*order, ("readyz", "GET", "/readyz", None)]:
            results.append(await call(api.client, *r))
    print(f"{fault}, quiet pool: {[(r.name, r.status, round(r.elapsed, 3)) for r in results]}")
    assert all(200 <= r.status < 300 for r in results), [
        (r.name, r.status, r.body[:120]) for r in results if not 200 <= r.status < 300
    ]


def route_classes(sid: str) -> list[tuple[str, str, str, object]]:
    """A route of each way a route reaches the database: the pool's lanes and routes, the
    SQLAlchemy session's reads (autocommit) and writes, listings, queries, exports."""
    return [
        *routes(sid),
        ("users", "GET", "/v1/users", None),
        ("items query", "POST", "/v1/memory-items/query", {"filters": {}}),
        ("jobs", "GET", "/v1/jobs", None),
        ("session export", "GET", f"/v1/sessions/{sid}/export", None),
        ("user export", "GET", "/v1/users/u-faults/export", None),
        ("sessions", "GET", "/v1/sessions", None),
        ("session patch", "PATCH", f"/v1/sessions/{sid}", {"metadata": {"k": 2}}),
        ("memory", "GET", f"/v1/sessions/{sid}/memory", None),
        (
            "item create",
            "POST",
            "/v1/memory-items",
            {"scope": "global", "kind": "fact", "text": "a"},
        ),
    ]


async def test_a_burst_of_150_on_a_frozen_database_answers_within_5_s_on_every_route(
    api: Api, private_pg: PrivatePostgres
) -> None:
    """Every route class under a burst of 150 (issue 44, finding 4: the SQLAlchemy
    session's routes took up to 9.1 s, their pool wait and connect each bounded, not the
    request)."""
    created = await api.client.post("/v1/sessions", json={"user_id": "u-faults"})
    assert created.status_code == 201, created.text
    classes = route_classes(api.session_id)
    for first in await asyncio.gather(*(call(api.client, *c) for c in classes)):
        assert 200 <= first.status < 300, (first.name, first.status, first.body[:300])
    burst = (classes * (150 // len(classes) + 1))[:150]
    private_pg.freeze()
    try:
        results = await asyncio.gather(*(call(api.client, *c) for c in burst))
    finally:
        private_pg.thaw()
    slowest: dict[str, float] = {}
    for r in results:
        slowest[r.name] = max(slowest.get(r.name, 0.0), round(r.elapsed, 2))
    print(f"150 on a frozen PostgreSQL, slowest per route: {slowest}")
    for r in results:
        if r.name.endswith("export") and r.status == 200:
            # the stream began before the freeze reached it: it must end in an error line
            last = json.loads(r.body.strip().splitlines()[-1])
            assert last.get("t") == "error", (r.name, r.body[-300:])
        else:
            _unavailable(r)
        assert r.elapsed <= BOUND, (r.name, r.elapsed)
    await _all_ok(api, 2)


async def test_an_export_cut_mid_stream_ends_with_an_error_line(
    api: Api, private_pg: PrivatePostgres
) -> None:
    """The database fails while an export streams (its connection is terminated between
    two fetches of the messages' cursor): the answer's status is long sent, so its last
    line says the file is incomplete, and an import refuses it."""
    import uuid

    import asyncpg

    sid = str(uuid.uuid4())
    lines = [
        {"t": "header", "format": "loom-export", "version": 1, "scope": {}, "exported_at": "x"},
        {"t": "session", "id": sid, "agent_id": "a"},
        *(
            {"t": "message", "session_id": sid, "seq": i + 1, "role": "user", "content": f"m {i}"}
            for i in range(12_000)
        ),
        {"t": "end", "counts": {"session": 1, "message": 12_000}},
    ]
    r = await api.client.post(
        "/v1/import",
        content="\n".join(json.dumps(x) for x in lines) + "\n",
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert r.status_code == 200, r.text
    watcher = await asyncpg.connect(private_pg.url.replace("+asyncpg", ""))
    try:
        export = asyncio.create_task(api.client.get(f"/v1/sessions/{sid}/export"))
        killed = 0
        for _ in range(500):
            killed = await watcher.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_xid IS NULL "
                "AND state IN ('idle in transaction', 'active') "
                "AND query ILIKE '%messages%' AND query NOT ILIKE '%pg_stat_activity%'"
            )
            if killed or export.done():
                break
            await asyncio.sleep(0.005)
        r = await export
    finally:
        await watcher.close()
    assert killed, "the export ended before its connection could be cut"
    assert r.status_code == 200
    last = json.loads(r.text.strip().splitlines()[-1])
    assert last["t"] == "error" and last["code"] == "database_unavailable", last
    assert "incomplete" in last["message"]
    again = await api.client.post(
        "/v1/import",
        content=r.text,
        headers={"Content-Type": "application/x-ndjson", "X-Agent-Id": "a"},
    )
    assert again.status_code == 422, again.text

"""Through PgBouncer in transaction mode (Debian's 1.18, which does not track prepared
statements): `loom-memory migrate`, the app's startup and its hot paths (create a session,
append, build the context, search) with `LOOM_DB_STATEMENT_CACHE=false`, several clients at
once on fewer server connections than the app's pools hold; and, with the caches on, the
failure the setting is for.

PgBouncer runs as the `postgres` user (it refuses root) on a private port, started and
stopped by the test, in front of a fresh database of the machine's PostgreSQL. The startup
parameters it does not know (`statement_timeout`, `plan_cache_mode`, `jit`) are in its
`ignore_startup_parameters`, as docs/scaling.md says to do (and to set them on the role).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.core.config import Settings
from app.launcher.migrate import upgrade
from app.main import create_app
from tests.support import citus
from tests.support.databases import PG_ADMIN_DSN, fresh_database

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("pgbouncer"),
    # scripts/test-citus's stage, which installs pgbouncer when missing (never skipped there)
    pytest.mark.skipif(citus.target() is None, reason="runs in scripts/test-citus"),
]

INI = """
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {dir}/users.txt
pool_mode = transaction
default_pool_size = 3
max_client_conn = 200
ignore_startup_parameters = statement_timeout,plan_cache_mode,jit,extra_float_digits
logfile = {dir}/pgbouncer.log
pidfile = {dir}/pgbouncer.pid
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def bouncer() -> Iterator[int]:
    """PgBouncer in transaction mode in front of the machine's PostgreSQL; its port."""
    if not os.path.exists(PGBOUNCER):
        pytest.fail("pgbouncer is not installed (apt-get install -y pgbouncer)")
    work = Path(f"/tmp/loom-pgbouncer-{os.getpid()}-{secrets.token_hex(3)}")
    work.mkdir()
    server = PG_ADMIN_DSN.split("@", 1)[1].split("/", 1)[0]
    host, _, port = server.partition(":")
    listen = _free_port()
    (work / "pgbouncer.ini").write_text(
        INI.format(host=host, port=port or "5432", listen=listen, dir=work)
    )
    (work / "users.txt").write_text('"postgres" ""\n')
    cmd = [PGBOUNCER, str(work / "pgbouncer.ini")]
    if os.geteuid() == 0:
        shutil.chown(work, "postgres")
        for f in work.iterdir():
            shutil.chown(f, "postgres")
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", listen), timeout=1).close()
                break
            except OSError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read() if proc.stderr else b""
                    raise RuntimeError(f"pgbouncer did not start: {err!r}") from exc
                time.sleep(0.1)
        yield listen
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def through(bouncer: int) -> Iterator[str]:
    """A fresh database's URL through PgBouncer."""
    with fresh_database("loom_pgb") as name:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{bouncer}/{name}"


@asynccontextmanager
async def _app(url: str, settings: Settings, cache: bool) -> AsyncIterator[tuple[Any, str]]:
    admin = "lm_pgb_" + secrets.token_urlsafe(16)
    app = create_app(
        Settings(
            DATABASE_URL=url,
            REDIS_URL=settings.redis_url,
            LOOM_ADMIN_KEY=SecretStr(admin),
            LOOM_QUEUE_NAME=settings.queue_name,
            LOOM_DATA_DIR=Path("/tmp/loom-test-data"),
            LOOM_DB_STATEMENT_CACHE=cache,
            LOOM_DB_POOL_SIZE=6,
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


async def _hot_paths(app: Any, admin: str, clients: int = 6) -> list[int]:
    """Tenant and key, then `clients` agents at once: create a session, append twice,
    build the context, search; every status seen (the checks are the caller's)."""
    async with _client(app, admin) as c:
        r = await c.post("/v1/tenants", json={"name": f"pgb-{secrets.token_hex(4)}"})
        assert r.status_code == 201, r.text
        tid = r.json()["id"]
        r = await c.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
        assert r.status_code == 201, r.text
        key = r.json()["secret"]

    async def agent(n: int) -> list[int]:
        seen: list[int] = []
        async with _client(app, key, **{"X-Agent-Id": f"agent-{n}"}) as c:
            r = await c.post("/v1/sessions", json={})
            seen.append(r.status_code)
            if r.status_code != 201:
                return seen
            sid = r.json()["id"]
            for i in range(2):
                r = await c.post(
                    f"/v1/sessions/{sid}/messages",
                    json={"messages": [{"role": "user", "content": f"lighthouse log {n}.{i}"}]},
                )
                seen.append(r.status_code)
                if r.status_code == 201:
                    assert r.json()["messages"][0]["seq"] == i + 1
            r = await c.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})
            seen.append(r.status_code)
            if r.status_code == 200:
                text = str(r.json()["messages"])
                assert f"lighthouse log {n}.0" in text and f"lighthouse log {n}.1" in text
            r = await c.post(f"/v1/sessions/{sid}/search", json={"query": "lighthouse"})
            seen.append(r.status_code)
            if r.status_code == 200:
                assert len(r.json()["results"]) == 2, r.text
        return seen

    return [s for seen in await asyncio.gather(*(agent(n) for n in range(clients))) for s in seen]


async def test_hot_paths_through_pgbouncer_transaction_mode_without_statement_caches(
    through: str, settings: Settings
) -> None:
    await asyncio.to_thread(upgrade, through, partitions=0)  # migrate through PgBouncer
    async with _app(through, settings, cache=False) as (app, admin):
        async with _client(app, admin) as c:
            assert (await c.get("/readyz")).status_code == 200
        for _ in range(2):  # the second round reuses the pools' connections
            seen = await _hot_paths(app, admin)
            assert seen and set(seen) <= {200, 201}, seen


async def test_statement_caches_on_break_behind_pgbouncer_transaction_mode(
    through: str, settings: Settings
) -> None:
    """What LOOM_DB_STATEMENT_CACHE=false is for: with the caches on, the same paths fail
    (a statement prepared on one server connection is run on another, or its name is
    taken there)."""
    await asyncio.to_thread(upgrade, through, partitions=0)
    failed = False
    try:
        async with _app(through, settings, cache=True) as (app, admin):
            for _ in range(2):
                seen = await _hot_paths(app, admin)
                failed = failed or any(s >= 500 for s in seen)
    except Exception:  # startup or a client's setup fails outright
        failed = True
    assert failed, "the statement caches worked through PgBouncer 1.18 in transaction mode"

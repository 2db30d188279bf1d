"""Test fixtures: real PostgreSQL and Redis of the machine.

One fresh database per test run (per xdist worker), migrated with Alembic; isolation per
test by a fresh tenant. The app runs with its lifespan; clients talk to it through
httpx's ASGI transport.

Fixtures: `settings`, `app`, `admin_client`, `tenant` (fresh tenant with a service key;
`await tenant.new_client(role="agent", agent_id="a1")`), `client` (the tenant's service
client, sending `X-Agent-Id: agent-1` by default), `db` (an AsyncSession on the test DB).
"""

import os
import secrets
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import settings as hsettings
from pydantic import SecretStr

from app.core.config import Settings
from app.launcher.migrate import upgrade
from app.main import create_app
from tests.support import citus, tenant_audit
from tests.support.api import make_client
from tests.support.databases import dsn_of, fresh_database, unreachable_services, url_of

# The one Hypothesis profile of the suite: reproducible (derandomized), no deadline (the
# machine is shared), the failing example printed. A test that needs more examples says so
# with its own @settings(max_examples=...). `--hypothesis-profile default` runs randomized.
hsettings.register_profile(
    "loom", max_examples=200, derandomize=True, deadline=None, print_blob=True
)
hsettings.load_profile("loom")

pytest_plugins: list[str] = []
if os.path.exists(os.path.join(os.path.dirname(__file__), "fakes", "fixtures.py")):
    pytest_plugins.append("tests.fakes.fixtures")

# LOOM_PARTITIONS=N: the run's database has its tenant-owned tables hash-partitioned by
# tenant into N partitions, and every statement the app runs is checked to name its tenant
# (`tests.support.tenant_audit`; scripts/test runs the API and jobs tests that way).
PARTITIONS = int(os.environ.get("LOOM_PARTITIONS", "0") or "0")
REDIS_TEST_URL = os.environ.get("LOOM_TEST_REDIS", "redis://127.0.0.1:6379/0")
ADMIN_KEY = "lm_test_admin_" + secrets.token_urlsafe(24)


# Run order: the longest modules first, so that with `-n 2 --dist loadgroup` (xdist hands out
# work in collection order) they start while the other worker is busy with short tests, and
# both workers run out of work together instead of one waiting for a long test it picked up
# last. Seconds each module's tests took (setup included) on the 2-core machine when it was
# otherwise quiet (`scripts/test tests --durations=0`); on a busy machine the same tests take
# two to three times as long, which is when the order matters most. The other `slow` modules
# (subprocesses, servers) come next, then the rest; a module's tests stay together, in order.
LONGEST_FIRST: dict[str, float] = {
    "tests/test_fuzz_openapi.py": 65,  # one test
    "tests/faults/test_worker_faults.py": 67,
    "tests/test_packaging.py": 48,  # one xdist_group: one worker builds its virtualenv
    "tests/test_examples.py": 47,
    "tests/faults/test_facts_worker_faults.py": 41,  # one test
    "tests/portability/test_import_invariant.py": 36,  # one test
    "tests/test_embedded.py": 33,
    "tests/faults/test_database_faults.py": 33,
    "tests/console/test_console_browser.py": 32,
    "tests/client_ts/test_typescript_client.py": 30,  # one test
    "tests/test_readme_walkthrough.py": 25,  # one test
    "tests/facts/test_facts_issue37_long_run.py": 20,  # one test
    "tests/core/test_metrics.py": 18,
    "tests/faults/test_erasure_faults.py": 14,
    "tests/test_first_ten_minutes.py": 13,
    "tests/mcp/test_mcp_endpoint.py": 12,
    "tests/adapters/test_claude_memory_tool.py": 12,
    "tests/scaling/test_partitioned_schema.py": 11,
    "tests/context/test_manifests_replay.py": 11,
    "tests/test_serve_workers.py": 10,
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--db-tests-only",
        action="store_true",
        default=False,
        help="run only the tests that reach the run's database (the test_database fixture, "
        "through settings, app, client, db...): scripts/test's partitioned pass, where the "
        "others would run exactly as in the first pass",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Stop at once, in one line, when the PostgreSQL or Redis the tests use cannot be
    reached (instead of a traceback per test). On the controller only (xdist's workers
    would each say it), and not for --collect-only, which reaches neither."""
    if hasattr(config, "workerinput") or config.option.collectonly or config.option.help:
        return
    problem = unreachable_services(REDIS_TEST_URL)
    if problem:
        raise pytest.UsageError(problem)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--db-tests-only"):
        keep = [i for i in items if "test_database" in getattr(i, "fixturenames", ())]
        dropped = [i for i in items if "test_database" not in getattr(i, "fixturenames", ())]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    weight: dict[str, float] = {}
    for item in items:
        w = LONGEST_FIRST.get(module(item), 1.0 if item.get_closest_marker("slow") else 0.0)
        weight[module(item)] = max(weight.get(module(item), 0.0), w)
    first = {m: n for n, m in enumerate(dict.fromkeys(module(i) for i in items))}
    items.sort(key=lambda i: (-weight[module(i)], first[module(i)]))


@pytest.fixture(scope="session")
def test_database(worker_id: str = "master") -> Iterator[str]:
    """Create and migrate a database for this test run; drop it afterwards."""
    import asyncio

    if citus.target() is not None:
        yield from _citus_database()
        return
    with fresh_database("loom_test") as name:
        url = url_of(name)
        upgrade(url, partitions=PARTITIONS)
        recorder = tenant_audit.Recorder()
        if PARTITIONS:
            tenant_audit.install(recorder, name)
        yield url
        if PARTITIONS:
            bad = asyncio.run(tenant_audit.violations(dsn_of(name), recorder))
            assert not bad, (
                "statements that do not name their tenant (they read every "
                "partition):\n\n" + "\n\n".join(bad)
            )


def _citus_database() -> Iterator[str]:
    """`LOOM_TEST_CITUS` (scripts/test-citus): the run's database on the Citus cluster,
    migrated (so distributed by tenant); afterwards, every statement of the app that Citus
    planned across shards, besides the ones marked FAN_OUT, fails the run."""
    from app.core.partitions import FAN_OUT

    with citus.database("loom_test") as dsn:
        start = citus.log_size()
        url = dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
        upgrade(url, partitions=0)
        yield url
        name = dsn.rsplit("/", 1)[1]
        wide = [
            s
            for s in citus.multi_shard_statements(citus.coordinator_log(), name, start=start)
            if FAN_OUT not in s
        ]
        assert not wide, (
            "statements Citus ran on more than one shard (they do not name their tenant):"
            "\n\n" + "\n\n".join(dict.fromkeys(wide))
        )


# On the Citus pass (three PostgreSQL servers on the tests' shared cores) a statement and a
# request's database time get more room: twenty appends queued on one session's row lock
# took longer than the default 4.5 s there with the machine busy.
CITUS_BOUNDS: dict[str, Any] = (
    {"LOOM_DB_STATEMENT_TIMEOUT_SECONDS": 15, "LOOM_DB_REQUEST_SECONDS": 16}
    if citus.target() is not None
    else {}
)


@pytest.fixture(scope="session")
def settings(test_database: str) -> Settings:
    return Settings(
        **CITUS_BOUNDS,
        DATABASE_URL=test_database,
        REDIS_URL=REDIS_TEST_URL,
        LOOM_ADMIN_KEY=SecretStr(ADMIN_KEY),
        LOOM_QUEUE_NAME=f"loom:test:{uuid.uuid4().hex[:12]}",
        LOOM_DATA_DIR=Path("/tmp/loom-test-data"),
    )


@pytest.fixture(scope="session")
async def app(settings: Settings) -> AsyncIterator[Any]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture(scope="session")
async def admin_client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(app, ADMIN_KEY) as c:
        yield c


@dataclass
class TenantHandle:
    """A fresh tenant with a service key; makes more clients and keys on demand."""

    app: Any
    admin: httpx.AsyncClient
    id: str
    service_key: str
    _clients: list[httpx.AsyncClient] = field(default_factory=list)

    async def create_key(self, role: str = "agent", agent_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"tenant_id": self.id, "role": role}
        if agent_id is not None:
            body["agent_id"] = agent_id
        resp = await self.admin.post("/v1/api-keys", json=body)
        assert resp.status_code == 201, resp.text
        return resp.json()

    def client_for(self, key: str, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
        c = make_client(self.app, key, headers)
        self._clients.append(c)
        return c

    async def new_client(
        self,
        role: str = "agent",
        agent_id: str | None = "agent-1",
        headers: dict[str, str] | None = None,
    ) -> httpx.AsyncClient:
        key = await self.create_key(role, agent_id if role == "agent" else None)
        hdrs = dict(headers or {})
        if role != "agent" and agent_id:
            hdrs.setdefault("X-Agent-Id", agent_id)
        return self.client_for(key["secret"], hdrs)

    async def close(self) -> None:
        for c in self._clients:
            await c.aclose()


@pytest.fixture
async def tenant(app: Any, admin_client: httpx.AsyncClient) -> AsyncIterator[TenantHandle]:
    resp = await admin_client.post("/v1/tenants", json={"name": f"t-{uuid.uuid4().hex[:8]}"})
    assert resp.status_code == 201, resp.text
    tid = resp.json()["id"]
    key = await admin_client.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
    assert key.status_code == 201, key.text
    handle = TenantHandle(app=app, admin=admin_client, id=tid, service_key=key.json()["secret"])
    yield handle
    await handle.close()


@pytest.fixture
async def client(tenant: TenantHandle) -> httpx.AsyncClient:
    return tenant.client_for(tenant.service_key, {"X-Agent-Id": "agent-1"})


@pytest.fixture(scope="session")
async def _test_engine(settings: Settings) -> AsyncIterator[Any]:
    """The tests' own connections to the run's database (application_name loom-tests, so
    the partitioned run's audit of the app's statements leaves them out)."""
    from sqlalchemy.ext.asyncio import create_async_engine

    assert settings.database_url
    engine = create_async_engine(
        settings.database_url,
        pool_size=2,
        connect_args={"server_settings": {"application_name": "loom-tests"}},
    )
    yield engine
    await engine.dispose()


@pytest.fixture
async def db(_test_engine: Any) -> AsyncIterator[Any]:
    """An AsyncSession of the tests' own (what a test reads or changes behind the API)."""
    from sqlalchemy.ext.asyncio import AsyncSession

    async with AsyncSession(_test_engine, expire_on_commit=False) as session:
        yield session

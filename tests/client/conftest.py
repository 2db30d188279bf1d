"""Fixtures for the Python client's tests: one real API server (a uvicorn subprocess on the
test database, `tests.support.live.live_api`) for the whole run, and per test a fresh
tenant with a service key, made through the client's own admin methods.

The client is imported from its source tree (`clients/python/src`), so the tests install
nothing at run time.
"""

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.core.config import Settings

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))

from loom_client import AsyncLoomClient, LoomClient  # noqa: E402

from tests.support.live import live_api  # noqa: E402

AGENT = "agent-1"


@pytest.fixture(scope="session")
def loom_server(settings: Settings) -> Iterator[str]:
    """Base URL of a live API process (no worker, no LLM: heuristic summaries, BM25)."""
    with live_api(settings, LOOM_LLM_PROVIDER="none") as base:
        yield base


@pytest.fixture(scope="session")
def loom_admin(loom_server: str, settings: Settings) -> Iterator[LoomClient]:
    assert settings.admin_key is not None
    with LoomClient(loom_server, settings.admin_key.get_secret_value()) as client:
        yield client


@dataclass(frozen=True)
class TenantKeys:
    base_url: str
    tenant_id: str
    service_key: str


@pytest.fixture
def loom_tenant(loom_server: str, loom_admin: LoomClient) -> TenantKeys:
    """A fresh tenant and a service key for it."""
    tenant = loom_admin.create_tenant(f"client-{uuid.uuid4().hex[:8]}")
    key = loom_admin.create_api_key("service", tenant_id=tenant.id)
    return TenantKeys(loom_server, tenant.id, key.secret)


@pytest.fixture
def loom(loom_tenant: TenantKeys) -> Iterator[LoomClient]:
    """The sync client with the tenant's service key, acting as `agent-1`."""
    with LoomClient(loom_tenant.base_url, loom_tenant.service_key, agent_id=AGENT) as client:
        yield client


@pytest.fixture
async def aloom(loom_tenant: TenantKeys) -> AsyncIterator[AsyncLoomClient]:
    """The async client with the tenant's service key, acting as `agent-1`."""
    async with AsyncLoomClient(
        loom_tenant.base_url, loom_tenant.service_key, agent_id=AGENT
    ) as client:
        yield client

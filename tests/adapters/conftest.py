"""Fixtures for the framework adapters' tests (`loom_client.adapters`): the Python client's
live server, tenant and clients (tests/client/conftest.py), and `rest`, a plain httpx client
with the same service key, to read back what an adapter stored through Loom's HTTP API.

Each adapter runs against its real library (langgraph, openai-agents, anthropic), installed by
`./scripts/test` with the client's extras."""

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.client.conftest import (  # noqa: F401  (fixtures, re-registered for this folder)
    AGENT,
    TenantKeys,
    aloom,
    loom,
    loom_admin,
    loom_server,
    loom_tenant,
)


@pytest.fixture
def rest(loom_tenant: TenantKeys) -> Iterator[httpx.Client]:  # noqa: F811
    """Loom's HTTP API with the tenant's service key, acting as the adapters' agent."""
    headers = {"Authorization": f"Bearer {loom_tenant.service_key}", "X-Agent-Id": AGENT}
    with httpx.Client(base_url=loom_tenant.base_url, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
async def arest(loom_tenant: TenantKeys) -> AsyncIterator[httpx.AsyncClient]:  # noqa: F811
    """`rest` for async tests."""
    headers = {"Authorization": f"Bearer {loom_tenant.service_key}", "X-Agent-Id": AGENT}
    async with httpx.AsyncClient(
        base_url=loom_tenant.base_url, headers=headers, timeout=30
    ) as client:
        yield client

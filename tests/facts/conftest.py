"""An API whose LLM is the fake Anthropic server (for `?wait=true` extraction), sharing the
run's database and Redis with the `app` fixture (so tenants and keys work on both)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from app.main import create_app
from tests.facts.support import facts_settings
from tests.fakes.llm_server import FakeLLMServer
from tests.support.api import make_client


@pytest.fixture(scope="session")
def llm_settings_for_facts(settings: Settings, fake_llm_server: FakeLLMServer) -> Settings:
    return facts_settings(settings, fake_llm_server.base_url)


@pytest.fixture(scope="session")
async def llm_app(llm_settings_for_facts: Settings) -> AsyncIterator[Any]:
    application = create_app(llm_settings_for_facts)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def llm_client(llm_app: Any, tenant: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The tenant's service key on the LLM-enabled API, acting as agent-1."""
    async with make_client(llm_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        yield c

"""An app whose LLM is the fake Anthropic server (the default test app has no LLM)."""

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.main import create_app


@pytest.fixture(scope="session")
async def llm_app(settings: Any, fake_llm_server: Any) -> AsyncIterator[Any]:
    llm_settings = settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test-fake"),
            "anthropic_base_url": fake_llm_server.base_url,
            "llm_provider": "anthropic",
            "llm_max_retries": 0,
            "llm_timeout_seconds": 5.0,
            "search_rerank_timeout_seconds": 3.0,
        }
    )
    application = create_app(llm_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def llm_client(llm_app: Any, tenant: Any, fake_llm: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The tenant's service client (X-Agent-Id agent-1) against the LLM-enabled app."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=llm_app),
        base_url="http://test",
        timeout=30,
        headers={"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "agent-1"},
    ) as c:
        yield c

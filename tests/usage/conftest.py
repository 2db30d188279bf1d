"""An API whose LLM is the fake Anthropic server, sharing the run's database and Redis with
the `app` fixture (tenants and keys work on both), and helpers of the ledger's tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from app.main import create_app
from tests.facts.support import facts_settings
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest
from tests.support.api import make_client


@pytest.fixture(scope="session")
async def usage_app(settings: Settings, fake_llm_server: FakeLLMServer) -> AsyncIterator[Any]:
    application = create_app(
        facts_settings(settings, fake_llm_server.base_url, usage_budget_refresh_seconds=0.0)
    )
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def usage_client(usage_app: Any, tenant: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The tenant's service key on the LLM-enabled API, acting as agent-1."""
    async with make_client(usage_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        yield c


def text_tokens(req: RecordedRequest, answer: str) -> tuple[int, int]:
    """The tokens the fake server reports for a text answer (tests/fakes/llm_server.py)."""
    return max(1, len(json.dumps(req.json)) // 4), len(answer) // 4


def tool_tokens(req: RecordedRequest, data: Any) -> tuple[int, int]:
    """The tokens the fake server reports for a tool call's answer."""
    return max(1, len(json.dumps(req.json)) // 4), max(1, len(json.dumps(data)) // 4)

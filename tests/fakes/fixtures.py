"""pytest fixtures for the fake LLM server (loaded by tests/conftest.py via pytest_plugins).

`fake_llm_server` is one server per test process (per xdist worker); `fake_llm` hands it
to a test after a reset, so scripts and recorded requests never leak between tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.llm_server import FakeLLMServer


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeLLMServer]:
    """The process-wide fake LLM server."""
    server = FakeLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_llm(fake_llm_server: FakeLLMServer) -> Iterator[FakeLLMServer]:
    """The fake LLM server, reset for this test (and reset again afterwards)."""
    fake_llm_server.reset()
    yield fake_llm_server
    fake_llm_server.reset()

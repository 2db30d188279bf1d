"""The LLM clients against the fake server, through the real anthropic/openai SDKs."""

from __future__ import annotations

import logging
import time

import pytest

from app.core.config import Settings
from app.llm.client import AnthropicLLM, OpenAICompatLLM, get_llm_client
from app.llm.errors import LLMError
from tests.fakes.llm_server import Empty, Fail, FakeLLMServer, Hang, Malformed, Reply

KEY = "sk-ant-test-SECRET-0123456789"


def make_settings(fake: FakeLLMServer, **over: object) -> Settings:
    values: dict[str, object] = {
        "llm_provider": "anthropic",
        "anthropic_api_key": KEY,
        "anthropic_base_url": fake.base_url,
        "llm_timeout_seconds": 5.0,
        "llm_max_retries": 0,
        "openai_base_url": fake.openai_base_url,
        "openai_model": "local-model",
    }
    values.update(over)
    return Settings(**values)  # type: ignore[arg-type]


def anthropic_client(fake: FakeLLMServer, **over: object) -> AnthropicLLM:
    client = get_llm_client(make_settings(fake, **over))
    assert isinstance(client, AnthropicLLM)
    return client


def openai_client(fake: FakeLLMServer, **over: object) -> OpenAICompatLLM:
    client = get_llm_client(make_settings(fake, llm_provider="openai", **over))
    assert isinstance(client, OpenAICompatLLM)
    return client


async def test_anthropic_success_sends_messages_request(fake_llm: FakeLLMServer) -> None:
    fake_llm.respond_with("  the summary  ")
    client = anthropic_client(fake_llm, summary_model="claude-haiku-4-5")
    try:
        text = await client.complete("be brief", "summarise this", max_tokens=123)
    finally:
        await client.aclose()
    assert text == "the summary"
    [req] = fake_llm.requests
    assert req.path == "/v1/messages"
    # SDK 2.x sends the API key as a bearer token; 0.x used x-api-key.
    assert KEY in (req.headers.get("x-api-key"), req.headers.get("authorization", "")[7:])
    assert req.json["model"] == "claude-haiku-4-5"
    assert req.json["max_tokens"] == 123
    assert req.system == "be brief"
    assert req.json["messages"] == [{"role": "user", "content": "summarise this"}]


async def test_model_override_is_sent(fake_llm: FakeLLMServer) -> None:
    client = anthropic_client(fake_llm, rerank_model="claude-sonnet-x")
    try:
        await client.complete("s", "p", max_tokens=10, model=client.rerank_model)
    finally:
        await client.aclose()
    assert fake_llm.requests[0].json["model"] == "claude-sonnet-x"


@pytest.mark.parametrize("status", [500, 529, 429])
async def test_transient_status_is_retryable_llm_error(
    fake_llm: FakeLLMServer, status: int
) -> None:
    fake_llm.fail(status)
    client = anthropic_client(fake_llm, llm_max_retries=2)
    try:
        with pytest.raises(LLMError) as info:
            await client.complete("s", "p", max_tokens=10)
    finally:
        await client.aclose()
    assert info.value.status_code == status
    assert info.value.retryable
    # the SDK's own retries happened: 1 + 2 attempts
    assert len(fake_llm.requests) == 3


async def test_sdk_retry_recovers_after_overload(fake_llm: FakeLLMServer) -> None:
    fake_llm.script(Fail(529), Reply("second time lucky"))
    client = anthropic_client(fake_llm, llm_max_retries=1)
    try:
        assert await client.complete("s", "p", max_tokens=10) == "second time lucky"
    finally:
        await client.aclose()
    assert len(fake_llm.requests) == 2


async def test_auth_error_is_not_retryable_and_hides_key(fake_llm: FakeLLMServer) -> None:
    fake_llm.fail(401)
    client = anthropic_client(fake_llm, llm_max_retries=2)
    try:
        with pytest.raises(LLMError) as info:
            await client.complete("s", "p", max_tokens=10)
    finally:
        await client.aclose()
    assert not info.value.retryable
    assert len(fake_llm.requests) == 1
    assert KEY not in str(info.value) and KEY not in repr(client)


async def test_timeout_is_llm_error(fake_llm: FakeLLMServer) -> None:
    fake_llm.hang()
    client = anthropic_client(fake_llm, llm_timeout_seconds=0.3, llm_max_retries=0)
    started = time.monotonic()
    try:
        with pytest.raises(LLMError) as info:
            await client.complete("s", "p", max_tokens=10)
    finally:
        await client.aclose()
    assert time.monotonic() - started < 3
    assert info.value.retryable
    assert "timed out" in info.value.message


@pytest.mark.parametrize(
    "action", [Empty(), Empty(blank=True), Malformed("json"), Malformed("shape")]
)
async def test_empty_or_malformed_answer_is_llm_error(
    fake_llm: FakeLLMServer, action: object
) -> None:
    fake_llm.script(action)  # type: ignore[arg-type]
    client = anthropic_client(fake_llm)
    try:
        with pytest.raises(LLMError) as info:
            await client.complete("s", "p", max_tokens=10)
    finally:
        await client.aclose()
    assert not info.value.retryable


async def test_connection_refused_is_retryable(fake_llm: FakeLLMServer) -> None:
    client = anthropic_client(fake_llm, anthropic_base_url="http://127.0.0.1:9")
    try:
        with pytest.raises(LLMError) as info:
            await client.complete("s", "p", max_tokens=10)
    finally:
        await client.aclose()
    assert info.value.retryable


async def test_openai_success(fake_llm: FakeLLMServer) -> None:
    fake_llm.respond_with(lambda req: f"echo:{req.text}")
    client = openai_client(fake_llm, openai_api_key="sk-local-SECRET")
    try:
        assert await client.complete("sys", "hello", max_tokens=50) == "echo:hello"
    finally:
        await client.aclose()
    [req] = fake_llm.requests_for("openai")
    assert req.path == "/v1/chat/completions"
    assert req.json["model"] == "local-model"
    assert req.json["max_tokens"] == 50
    assert req.system == "sys"
    assert req.headers["authorization"] == "Bearer sk-local-SECRET"


async def test_openai_without_key_works_for_local_servers(fake_llm: FakeLLMServer) -> None:
    client = openai_client(fake_llm, openai_api_key=None)
    try:
        assert await client.complete("sys", "x", max_tokens=5)
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "action,retryable",
    [
        (Fail(500), True),
        (Fail(529), True),
        (Empty(), False),
        (Malformed("json"), False),
        (Malformed("shape"), False),
    ],
)
async def test_openai_failures(fake_llm: FakeLLMServer, action: object, retryable: bool) -> None:
    fake_llm.script(action)  # type: ignore[arg-type]
    client = openai_client(fake_llm)
    try:
        with pytest.raises(LLMError) as info:
            await client.complete("s", "p", max_tokens=10)
    finally:
        await client.aclose()
    assert info.value.retryable is retryable


async def test_openai_timeout(fake_llm: FakeLLMServer) -> None:
    fake_llm.script(Hang(5))
    client = openai_client(fake_llm, llm_timeout_seconds=0.3)
    try:
        with pytest.raises(LLMError) as info:
            await client.complete("s", "p", max_tokens=10)
    finally:
        await client.aclose()
    assert info.value.retryable


def test_no_key_means_no_client(fake_llm: FakeLLMServer) -> None:
    assert get_llm_client(make_settings(fake_llm, anthropic_api_key=None)) is None
    assert get_llm_client(make_settings(fake_llm, llm_provider="none")) is None
    assert (
        get_llm_client(
            make_settings(
                fake_llm, llm_provider="openai", openai_base_url=None, openai_api_key=None
            )
        )
        is None
    )


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("LOOM_SUMMARY_MODEL", "claude-haiku-test")
    monkeypatch.setenv("LOOM_LLM_TIMEOUT_SECONDS", "7.5")
    settings = Settings()
    assert settings.summary_model == "claude-haiku-test"
    assert settings.llm_timeout_seconds == 7.5
    assert KEY not in repr(settings)


async def test_keys_never_logged(fake_llm: FakeLLMServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm.script(Fail(500), Reply("ok"))
    client = anthropic_client(fake_llm, llm_max_retries=1)
    try:
        await client.complete("s", "p", max_tokens=10)
    finally:
        await client.aclose()
    assert KEY not in caplog.text

"""LLM clients: Anthropic Messages API and OpenAI-compatible chat completions.

One small interface, `LLMClient.complete(system, prompt, *, max_tokens, model=None) -> str`,
so the summariser and the search reranker never see a provider SDK. Every failure (HTTP
error after the SDK's own retries, timeout, connection error, empty or malformed answer)
becomes `LLMError`; nothing else escapes. Credentials are passed to the SDK explicitly and
never appear in error messages or logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import SecretStr

from app.core.config import Settings
from app.llm.errors import LLMError
from app.llm.usage import Meter

log = logging.getLogger("loom.llm")

# The SDKs back off at most 8 s between attempts; the outer deadline allows for that so it
# only fires when a server trickles bytes forever (the per-read timeout never trips then).
_MAX_SDK_BACKOFF = 8.0
_RETRYABLE_STATUS = {408, 409, 429}
# Local OpenAI-compatible servers (llama.cpp, Ollama, vLLM) ignore the key but the SDK
# insists on one.
_NO_KEY = "not-needed"


@dataclass(frozen=True)
class ToolAnswer:
    """The input of the one tool call a structured request forced, and the call's usage."""

    data: Any
    input_tokens: int
    output_tokens: int


@runtime_checkable
class LLMClient(Protocol):
    """What the rest of the service may ask of an LLM."""

    provider: str
    model: str
    rerank_model: str
    meter: Meter  # every call metered and recorded (app.llm.usage)

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int, model: str | None = None
    ) -> str:
        """One single-turn completion; the answer's text, stripped. Raises `LLMError`."""
        ...

    async def structured(
        self,
        system: str,
        prompt: str,
        *,
        tool_name: str,
        tool_description: str,
        schema: dict[str, Any],
        max_tokens: int,
        model: str | None = None,
    ) -> ToolAnswer:
        """Structured output: the model must call `tool_name` (forced tool choice) with
        input meant to match `schema` (the caller validates it). Raises `LLMError`."""
        ...

    async def aclose(self) -> None:
        """Release the HTTP connection pool."""
        ...


def _secret(value: SecretStr | str | None) -> str | None:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    return value or None


def _deadline(timeout: float, max_retries: int) -> float:
    return timeout * (max_retries + 1) + _MAX_SDK_BACKOFF * max_retries + 1.0


def _status_error(provider: str, status: int, kind: str | None) -> LLMError:
    retryable = status in _RETRYABLE_STATUS or status >= 500
    detail = f" {kind}" if kind else ""
    return LLMError(f"{provider}: HTTP {status}{detail}", status_code=status, retryable=retryable)


@contextlib.asynccontextmanager
async def _calling(provider: str, sdk: Any, deadline: float) -> AsyncIterator[None]:
    """One SDK call and the reading of its answer, within `deadline`: every failure
    (`sdk` is the `anthropic` or `openai` module) becomes `LLMError`, nothing else escapes."""
    try:
        async with asyncio.timeout(deadline):
            yield
    except sdk.APIStatusError as exc:
        kind = exc.type if isinstance(getattr(exc, "type", None), str) else None
        raise _status_error(provider, exc.status_code, kind) from None
    except (sdk.APITimeoutError, TimeoutError):
        raise LLMError(f"{provider}: timed out", retryable=True) from None
    except sdk.APIConnectionError:
        raise LLMError(f"{provider}: connection failed", retryable=True) from None
    except Exception as exc:  # malformed body, schema surprises: never escape raw
        raise LLMError(f"{provider}: malformed response ({type(exc).__name__})") from None


class AnthropicLLM:
    """`LLMClient` over `anthropic.AsyncAnthropic` (Messages API)."""

    provider = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        model: str,
        rerank_model: str | None,
        timeout: float,
        max_retries: int,
    ) -> None:
        self.model = model
        self.rerank_model = rerank_model or model
        self.meter = Meter()
        self._deadline = _deadline(timeout, max_retries)
        import anthropic  # on first use: the SDK costs an API process seconds to import

        self._module: Any = anthropic
        self._sdk = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def __repr__(self) -> str:
        return f"AnthropicLLM(model={self.model!r}, base_url={str(self._sdk.base_url)!r})"

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int, model: str | None = None
    ) -> str:
        """Ask the Messages API; see `LLMClient.complete`."""
        model = model or self.model
        async with self.meter.call(self.provider, model, "chat") as call:
            async with _calling(self.provider, self._module, self._deadline):
                msg = await self._sdk.messages.create(
                    model=model,
                    max_tokens=max_tokens,
                    system=system,
                    messages=[{"role": "user", "content": prompt}],
                )
                call.tokens(getattr(msg, "usage", None), "input_tokens", "output_tokens")
                text = "".join(
                    getattr(block, "text", "") or ""
                    for block in (msg.content or [])
                    if getattr(block, "type", None) == "text"
                )
            if not text.strip():
                stop = getattr(msg, "stop_reason", None)
                raise LLMError(f"{self.provider}: empty answer (stop_reason={stop})")
        return text.strip()

    async def structured(
        self,
        system: str,
        prompt: str,
        *,
        tool_name: str,
        tool_description: str,
        schema: dict[str, Any],
        max_tokens: int,
        model: str | None = None,
    ) -> ToolAnswer:
        """Messages API with one tool and `tool_choice` forcing it; see `LLMClient`."""
        model = model or self.model
        async with self.meter.call(self.provider, model, "chat", tool_name) as call:
            async with _calling(self.provider, self._module, self._deadline):
                msg = await self._sdk.messages.create(
                    model=model,
                    max_tokens=max_tokens,
                    system=system,
                    messages=[{"role": "user", "content": prompt}],
                    tools=[
                        {
                            "name": tool_name,
                            "description": tool_description,
                            "input_schema": schema,
                        }
                    ],
                    tool_choice={"type": "tool", "name": tool_name},
                )
                call.tokens(getattr(msg, "usage", None), "input_tokens", "output_tokens")
                calls = [
                    b
                    for b in (msg.content or [])
                    if getattr(b, "type", None) == "tool_use"
                    and getattr(b, "name", None) == tool_name
                ]
            if not calls:
                raise LLMError(
                    f"{self.provider}: no {tool_name} tool call in the answer "
                    f"(stop_reason={getattr(msg, 'stop_reason', None)})"
                )
        return ToolAnswer(getattr(calls[0], "input", None), call.input_tokens, call.output_tokens)

    async def aclose(self) -> None:
        """Write the ledger's last rows; close the SDK's HTTP client."""
        await self.meter.flush()
        await self._sdk.close()


class OpenAICompatLLM:
    """`LLMClient` over `openai.AsyncOpenAI` chat completions (OpenAI or a local server)."""

    provider = "openai"

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        model: str,
        rerank_model: str | None,
        timeout: float,
        max_retries: int,
    ) -> None:
        self.model = model
        self.rerank_model = rerank_model or model
        self.meter = Meter()
        self._deadline = _deadline(timeout, max_retries)
        kwargs: dict[str, Any] = {
            "api_key": api_key or _NO_KEY,
            "timeout": timeout,
            "max_retries": max_retries,
        }
        if base_url:
            kwargs["base_url"] = base_url
        import openai  # on first use, like the Anthropic SDK

        self._module = openai
        self._sdk = openai.AsyncOpenAI(**kwargs)

    def __repr__(self) -> str:
        return f"OpenAICompatLLM(model={self.model!r}, base_url={str(self._sdk.base_url)!r})"

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int, model: str | None = None
    ) -> str:
        """Ask the chat completions endpoint; see `LLMClient.complete`."""
        model = model or self.model
        async with self.meter.call(self.provider, model, "chat") as call:
            async with _calling(self.provider, self._module, self._deadline):
                # max_tokens (not max_completion_tokens): what local servers understand.
                resp = await self._sdk.chat.completions.create(
                    model=model,
                    max_tokens=max_tokens,
                    messages=[
                        {"role": "system", "content": system},
                        {"role": "user", "content": prompt},
                    ],
                )
                call.tokens(getattr(resp, "usage", None), "prompt_tokens", "completion_tokens")
                choice = resp.choices[0]
                text = choice.message.content or ""
            if not text.strip():
                raise LLMError(f"{self.provider}: empty answer")
        return text.strip()

    async def structured(
        self,
        system: str,
        prompt: str,
        *,
        tool_name: str,
        tool_description: str,
        schema: dict[str, Any],
        max_tokens: int,
        model: str | None = None,
    ) -> ToolAnswer:
        """Chat completions with one function and `tool_choice` forcing it."""
        model = model or self.model
        async with self.meter.call(self.provider, model, "chat", tool_name) as call:
            async with _calling(self.provider, self._module, self._deadline):
                resp = await self._sdk.chat.completions.create(
                    model=model,
                    max_tokens=max_tokens,
                    messages=[
                        {"role": "system", "content": system},
                        {"role": "user", "content": prompt},
                    ],
                    tools=[
                        {
                            "type": "function",
                            "function": {
                                "name": tool_name,
                                "description": tool_description,
                                "parameters": schema,
                            },
                        }
                    ],
                    tool_choice={"type": "function", "function": {"name": tool_name}},
                )
                calls = [
                    c
                    for c in (resp.choices[0].message.tool_calls or [])
                    if getattr(getattr(c, "function", None), "name", None) == tool_name
                ]
                call.tokens(getattr(resp, "usage", None), "prompt_tokens", "completion_tokens")
                data = json.loads(calls[0].function.arguments) if calls else None  # type: ignore[union-attr]
            if not calls:
                raise LLMError(f"{self.provider}: no {tool_name} tool call in the answer")
        return ToolAnswer(data, call.input_tokens, call.output_tokens)

    async def aclose(self) -> None:
        """Write the ledger's last rows; close the SDK's HTTP client."""
        await self.meter.flush()
        await self._sdk.close()


def get_llm_client(settings: Settings) -> LLMClient | None:
    """The configured client, or None when no provider/key is configured.

    `LOOM_LLM_PROVIDER=anthropic` needs `ANTHROPIC_API_KEY`; `openai` needs
    `LOOM_OPENAI_BASE_URL` or `LOOM_OPENAI_API_KEY` (and `LOOM_OPENAI_MODEL`, else the
    summary model name is sent); `none` disables the LLM. None means callers use the
    heuristic summariser and BM25-only search.
    """
    provider = settings.llm_provider
    timeout = float(settings.llm_timeout_seconds)
    retries = int(settings.llm_max_retries)
    if provider == "none":
        return None
    if provider == "openai":
        base_url = settings.openai_base_url or None
        key = _secret(settings.openai_api_key)
        if not base_url and not key:
            log.warning(
                "LOOM_LLM_PROVIDER=openai without LOOM_OPENAI_BASE_URL or "
                "LOOM_OPENAI_API_KEY: LLM disabled"
            )
            return None
        model = settings.openai_model or settings.summary_model
        return OpenAICompatLLM(
            api_key=key,
            base_url=base_url,
            model=model,
            rerank_model=settings.rerank_model,
            timeout=timeout,
            max_retries=retries,
        )
    if provider != "anthropic":
        raise ValueError(f"unknown LOOM_LLM_PROVIDER {provider!r}")
    key = _secret(settings.anthropic_api_key)
    if not key:
        return None
    return AnthropicLLM(
        api_key=key,
        base_url=settings.anthropic_base_url or None,
        model=settings.summary_model,
        rerank_model=settings.rerank_model,
        timeout=timeout,
        max_retries=retries,
    )

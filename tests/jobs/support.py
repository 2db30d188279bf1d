"""Helpers for compression-job tests: LLM-enabled settings and in-process burst workers."""

from __future__ import annotations

from typing import Any

import httpx
from arq.worker import Worker
from pydantic import SecretStr

from app.core.config import Settings
from app.core.redis import arq_settings
from tests.fakes.llm_server import FakeLLMServer
from tests.support import api
from workers.settings import compression_functions, shutdown, startup

FAKE_KEY = "sk-ant-fake-test-key-0000"
SMALL = {
    "max_context_tokens": 4000,
    "reserved_output_tokens": 400,
    "l1_max_messages": 10,
    "max_l2_tokens": 2000,
}


def llm_settings(settings: Settings, fake: FakeLLMServer, **over: Any) -> Settings:
    """The test settings with the LLM pointed at the fake and fast retries."""
    values: dict[str, Any] = {
        "llm_provider": "anthropic",
        "anthropic_api_key": SecretStr(FAKE_KEY),
        "anthropic_base_url": fake.base_url,
        "llm_timeout_seconds": 5.0,
        "llm_max_retries": 0,
        "compress_retry_base_seconds": 0.0,
        "compress_llm_tries": 2,
        "compress_max_tries": 3,
    }
    values.update(over)
    return settings.model_copy(update=values)


async def run_burst_worker(settings: Settings) -> Worker:
    """A real arq worker (the production startup/shutdown and job function) that runs
    every queued job, retries included, then stops."""
    assert settings.redis_url
    worker = Worker(
        functions=compression_functions(settings),
        redis_settings=arq_settings(settings.redis_url),
        queue_name=settings.queue_name,
        burst=True,
        poll_delay=0,
        ctx={"settings": settings},
        on_startup=startup,
        on_shutdown=shutdown,
        handle_signals=False,
        max_jobs=4,
    )
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker


async def drain_queue(settings: Settings) -> None:
    """Forget jobs other tests left in this run's queue (their sessions are not ours)."""
    import redis.asyncio as aioredis

    assert settings.redis_url
    r = aioredis.Redis.from_url(settings.redis_url)
    try:
        ids = await r.zrange(settings.queue_name, 0, -1)
        keys = [settings.queue_name, *(f"arq:job:{i.decode()}" for i in ids)]
        await r.delete(*keys)
    finally:
        await r.aclose()


async def new_session(client: httpx.AsyncClient, **config: Any) -> str:
    """A session with the SMALL window (`config` overrides its fields)."""
    return await api.new_session(client, **{**SMALL, **config})


def exchange(n: int, words: int = 25) -> list[dict[str, Any]]:
    """One user question and one assistant answer, ~2 x (words + 10) tokens."""
    body = " ".join(f"fact{n}_{i}" for i in range(words))
    return [
        {"role": "user", "content": f"question {n}: please remember {body}"},
        {"role": "assistant", "content": f"answer {n}: noted {body}"},
    ]


async def append(client: httpx.AsyncClient, sid: str, msgs: list[dict[str, Any]]) -> None:
    resp = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert resp.status_code == 201, resp.text


async def memory(client: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/sessions/{sid}/memory")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())

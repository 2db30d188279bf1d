"""Helpers of the facts tests: the settings of an LLM-enabled app, a burst worker running
the real jobs, and HTTP shortcuts. The model is `tests.fakes.fact_model.FactModel`."""

from __future__ import annotations

from typing import Any

import httpx
from arq.worker import Worker

from app.core.config import Settings
from app.core.redis import arq_settings
from app.jobs.followup import run_after_job
from tests.fakes.fact_model import FactModel, Rule
from workers.settings import compression_functions, facts_functions, shutdown, startup

__all__ = [
    "PREFERENCES",
    "FactModel",
    "Rule",
    "facts_session",
    "facts_settings",
    "items",
    "run_burst_worker",
    "say",
]

PREFERENCES = [
    Rule("I prefer tea", "The user prefers tea in the morning.", "user.morning_drink"),
    Rule("switched to coffee", "The user prefers coffee in the morning.", "user.morning_drink"),
    Rule("sister lives in Lisbon", "The user's sister lives in Lisbon.", "user.sister.home_city"),
]


def facts_settings(settings: Settings, fake_base_url: str, **over: Any) -> Settings:
    values: dict[str, Any] = {
        "llm_provider": "anthropic",
        "anthropic_api_key": "sk-ant-fake-test-key-0000",
        "anthropic_base_url": fake_base_url,
        "llm_timeout_seconds": 5.0,
        "llm_max_retries": 0,
        "facts_retry_base_seconds": 0.0,
        "facts_max_tries": 2,
        # a second app per test process: small pools (the machine's PostgreSQL is shared)
        "db_pool_size": 4,
    }
    values.update(over)
    from pydantic import SecretStr

    values["anthropic_api_key"] = SecretStr(values["anthropic_api_key"])
    return settings.model_copy(update=values)


async def run_burst_worker(settings: Settings) -> Worker:
    """A real arq worker with the compression and facts jobs that runs every queued job
    (retries included), then stops."""
    assert settings.redis_url
    worker = Worker(
        functions=[*compression_functions(settings), *facts_functions(settings)],
        redis_settings=arq_settings(settings.redis_url),
        queue_name=settings.queue_name,
        burst=True,
        poll_delay=0,
        ctx={"settings": settings},
        on_startup=startup,
        on_shutdown=shutdown,
        after_job_end=run_after_job,
        handle_signals=False,
        max_jobs=4,
    )
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker


async def say(client: httpx.AsyncClient, sid: str, *pairs: tuple[str, str], day: int = 1) -> None:
    """Append user/assistant turns, dated 2026-03-<day> at 09:00, 09:01..."""
    msgs = []
    for k, (user, answer) in enumerate(pairs):
        msgs.append(
            {"role": "user", "content": user, "created_at": f"2026-03-{day:02d}T09:{2 * k:02d}:00Z"}
        )
        msgs.append(
            {
                "role": "assistant",
                "content": answer,
                "created_at": f"2026-03-{day:02d}T09:{2 * k + 1:02d}:00Z",
            }
        )
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def facts_session(
    client: httpx.AsyncClient, agent_id: str | None = None, **facts: Any
) -> str:
    body: dict[str, Any] = {"config": {"facts": {"enabled": True, **facts}}}
    if agent_id:
        body["agent_id"] = agent_id
    r = await client.post("/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def items(
    client: httpx.AsyncClient, *, include_invalidated: bool = False, **filters: Any
) -> list[dict[str, Any]]:
    r = await client.post(
        "/v1/memory-items/query",
        params={"include_invalidated": str(include_invalidated).lower()},
        json={"filters": {"kind": "fact", **filters}, "order_by": "-timestamp"},
    )
    assert r.status_code == 200, r.text
    return list(r.json()["items"])

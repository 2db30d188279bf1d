"""Issue 37, finding 9: a failing batch is set aside within its retry setting (it was about
60 s per retry whatever the setting: the job's own end re-scheduled it to the quiet time),
and by default within 30 s."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from app.core.config import Settings
from app.facts.state import retry_waiting
from app.facts.tasks import set_aside_within
from tests.facts.helpers import talk
from tests.facts.support import facts_session, facts_settings, run_burst_worker
from tests.fakes.llm_server import FakeLLMServer, ToolUse
from tests.jobs.support import drain_queue


def test_the_default_retries_set_a_batch_aside_within_30_seconds() -> None:
    defaults = Settings()
    assert defaults.facts_max_tries >= 3
    assert set_aside_within(defaults) <= 30.0
    fast = defaults.model_copy(update={"facts_retry_base_seconds": 0.5, "facts_max_tries": 3})
    assert set_aside_within(fast) == 0.5 + 1.0


def test_an_append_leaves_a_running_or_retrying_job_alone() -> None:
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    later = t0 + timedelta(seconds=5)
    assert retry_waiting("running", None)
    assert retry_waiting("pending", "FactOutputError: x", later, t0)  # waits for its retry
    assert not retry_waiting("pending", "FactOutputError: x", t0, later)  # queued anew
    assert not retry_waiting("pending", None, later, t0)
    assert not retry_waiting("failed", "x", later, t0) and not retry_waiting(None, None)


async def test_a_failing_batch_is_set_aside_as_the_retry_setting_says(
    client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    # the quiet time is long (60 s): a retry moved to it would not finish in time
    fast = facts_settings(
        settings,
        fake_llm.base_url,
        facts_retry_base_seconds=0.3,
        facts_max_tries=3,
        facts_quiet_seconds=60.0,
    )
    tries: list[float] = []

    def broken(req: Any) -> Any:
        tries.append(time.monotonic())
        return {"facts": [{"text": "x", "key": "user.x", "importance": 1, "source_seqs": [99]}]}

    fake_llm.set_default(ToolUse(broken))
    sid = await facts_session(client)
    await talk(client, sid, ("2026-01-03T09:00:00Z", "I live in Paris."))
    await client.post(f"/v1/sessions/{sid}/memory/extract")
    started = time.monotonic()
    await asyncio.wait_for(run_burst_worker(fast), timeout=20)
    took = time.monotonic() - started
    state = (await client.get(f"/v1/sessions/{sid}/memory/extract")).json()
    assert state["status"] == "failed" and state["watermark_seq"] == 2, state
    assert len(tries) == 3, tries
    gaps = [b - a for a, b in zip(tries, tries[1:], strict=False)]
    assert 0.25 <= gaps[0] < 3 and 0.55 <= gaps[1] < 4, gaps
    assert took < set_aside_within(fast) + 8, took

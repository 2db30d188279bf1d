"""Issue 37, finding 10: a session can end (`PATCH /v1/sessions/{id}` `status: ended`);
ending flushes its fact extraction at once; an append to an ended session reopens it."""

from __future__ import annotations

import time
from typing import Any

import httpx
import redis.asyncio as aioredis

from app.core.config import Settings
from tests.facts.helpers import SCENARIO, scope_facts, talk
from tests.facts.support import FactModel, facts_session, run_burst_worker
from tests.fakes.llm_server import FakeLLMServer
from tests.jobs.support import drain_queue


async def score(settings: Settings, sid: str) -> float | None:
    r = aioredis.Redis.from_url(str(settings.redis_url))
    try:
        return await r.zscore(settings.queue_name, f"facts:{sid}")
    finally:
        await r.aclose()


async def test_ending_a_session_extracts_at_once_and_an_append_reopens_it(
    client: httpx.AsyncClient,
    settings: Settings,
    fake_llm: FakeLLMServer,
    llm_settings_for_facts: Settings,
) -> None:
    await drain_queue(settings)
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    sid = await facts_session(client, scope="project/ending")
    await talk(client, sid, ("2026-01-10T09:00:00Z", "I live in Paris."))
    assert (await score(settings, sid) or 0) / 1000 > time.time() + 30  # waits for quiet
    r = await client.patch(f"/v1/sessions/{sid}", json={"status": "ended"})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["status"] == "ended" and body["ended_at"] is not None
    assert (await score(settings, sid) or 1e18) / 1000 <= time.time()  # at once
    await run_burst_worker(llm_settings_for_facts)
    assert [f["text"] for f in await scope_facts(client, "project/ending")] == [
        "The user lives in Paris."
    ]
    got = (await client.get(f"/v1/sessions/{sid}")).json()
    assert got["status"] == "ended"
    # an append reopens it (documented decision: not refused)
    await talk(client, sid, ("2026-01-11T09:00:00Z", "I prefer tea."))
    got = (await client.get(f"/v1/sessions/{sid}")).json()
    assert got["status"] == "active" and got["ended_at"] is None
    bad = await client.patch(f"/v1/sessions/{sid}", json={"status": "closed"})
    assert bad.status_code == 422, bad.text

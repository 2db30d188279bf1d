"""Extraction follows the conversation (issue 27): N new messages or T seconds of quiet,
debounced per session, with no call and no compression; messages that arrive while a job
runs are extracted after it; a poison batch is set aside and retried on demand; lost jobs
are recovered by the cron pass; without an LLM, the reason is visible."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import sqlalchemy as sa
from arq.worker import Worker

from app.core.config import Settings
from app.core.redis import arq_settings
from app.facts.startup import NO_LLM_LINE, say_why_facts_wait
from app.jobs.followup import run_after_job
from app.llm.client import get_llm_client
from app.main import create_app
from tests.facts.helpers import SCENARIO, extract, scope_facts, talk
from tests.facts.support import FactModel, facts_session, facts_settings, run_burst_worker
from tests.fakes.llm_server import FakeLLMServer, ToolUse
from tests.jobs.support import drain_queue
from tests.support.api import make_client
from workers.settings import compression_functions, facts_functions, shutdown, startup

QUIET = 2.0


@pytest.fixture(scope="module")
def quiet_settings(settings: Settings, fake_llm_server: FakeLLMServer) -> Settings:
    # one user message is enough for a quiet run here (the debounce is what these test;
    # issue 37's minimum and idle time: test_facts_issue37_cost.py)
    return facts_settings(
        settings, fake_llm_server.base_url, facts_quiet_seconds=QUIET, facts_quiet_min_user=1
    )


@pytest.fixture(scope="module")
async def quiet_app(quiet_settings: Settings) -> AsyncIterator[Any]:
    application = create_app(quiet_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def quiet(quiet_app: Any, tenant: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(quiet_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        yield c


async def worker(settings: Settings, poll: float = 0.1, on_end: Any = None) -> Worker:
    """A burst worker with the production hooks (the follow-up after each job)."""
    w = Worker(
        functions=[*compression_functions(settings), *facts_functions(settings)],
        redis_settings=arq_settings(str(settings.redis_url)),
        queue_name=settings.queue_name,
        burst=True,
        poll_delay=poll,
        ctx={"settings": settings},
        on_startup=startup,
        on_shutdown=shutdown,
        on_job_end=on_end,
        after_job_end=run_after_job,
        handle_signals=False,
        max_jobs=4,
    )
    try:
        await w.main()
    finally:
        await w.close()
    return w


async def status(client: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    return dict((await client.get(f"/v1/sessions/{sid}/memory/extract")).json())


async def score(settings: Settings, sid: str) -> float | None:
    r = aioredis.Redis.from_url(str(settings.redis_url))
    try:
        return await r.zscore(settings.queue_name, f"facts:{sid}")
    finally:
        await r.aclose()


async def test_a_short_session_is_extracted_after_the_quiet_time_with_no_call(
    quiet: httpx.AsyncClient, quiet_settings: Settings, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    sid = await facts_session(quiet)
    await talk(quiet, sid, ("2026-03-05T09:00:00Z", "I moved to Berlin last month."))
    first = await score(settings, sid)
    assert first is not None and await status(quiet, sid) == {
        **await status(quiet, sid),
        "status": "pending",
    }
    await asyncio.sleep(0.5)
    await talk(quiet, sid, ("2026-03-05T09:01:00Z", "My sister lives in Lisbon."))
    said = time.time()
    second = await score(settings, sid)
    assert second is not None and second > first  # debounced: quiet counts from the last
    await worker(quiet_settings)
    done = await status(quiet, sid)
    assert done["status"] == "succeeded" and done["watermark_seq"] == 4, done
    started = datetime.fromisoformat(done["started_at"]).timestamp()
    assert QUIET - 0.5 <= started - said <= QUIET + 10
    assert {f["text"] for f in await scope_facts(quiet, "agent/agent-1")} == {
        "The user lives in Berlin.",
        "The user's sister lives in Lisbon.",
    }
    # no compression ran: extraction does not wait for it
    assert (await quiet.get(f"/v1/sessions/{sid}/memory")).json()["compression"] is None


async def test_n_messages_start_it_at_once(
    quiet: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    sid = await facts_session(quiet)  # LOOM_FACTS_EVERY_MESSAGES: 6
    await talk(
        quiet,
        sid,
        ("2026-01-03T09:00:00Z", "I live in Paris."),
        ("2026-01-04T09:00:00Z", "I prefer tea."),
    )
    assert (await score(settings, sid) or 0) / 1000 > time.time() + 1  # waits for quiet
    await talk(quiet, sid, ("2026-01-05T09:00:00Z", "I have a cat called Tom."))
    assert (await score(settings, sid) or 0) / 1000 <= time.time()  # 6 waiting: now


async def test_messages_after_a_runs_last_look_are_extracted_after_it(
    quiet: httpx.AsyncClient, quiet_settings: Settings, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    sid = await facts_session(quiet)
    await talk(quiet, sid, ("2026-01-03T09:00:00Z", "I live in Paris."))
    await quiet.post(f"/v1/sessions/{sid}/memory/extract")  # a flush: now
    ends = 0

    async def messages_arrive_at_the_end(ctx: dict[str, Any]) -> None:
        nonlocal ends  # after the run's last look, before arq lets go of its job id
        ends += 1
        if ends == 1:
            await talk(quiet, sid, ("2026-03-05T09:00:00Z", "I moved to Berlin last month."))

    await worker(quiet_settings, on_end=messages_arrive_at_the_end)
    # scheduled again by the run's end (run by that worker, or queued if it had stopped)
    if await score(settings, sid) is not None:
        await worker(quiet_settings)
    done = await status(quiet, sid)
    assert done["watermark_seq"] == 4 and done["runs"] == 2, done
    assert {
        f["text"] for f in await scope_facts(quiet, "agent/agent-1") if f["invalid_at"] is None
    } == {"The user lives in Berlin."}


async def test_a_poison_batch_is_set_aside_and_retried_on_demand(
    client: httpx.AsyncClient,
    llm_client: httpx.AsyncClient,
    settings: Settings,
    fake_llm: FakeLLMServer,
    llm_settings_for_facts: Settings,
) -> None:
    await drain_queue(settings)
    model = FactModel(SCENARIO)
    poisoned = {"on": True}

    def answer(req: Any) -> Any:
        if poisoned["on"] and "Paris" in req.text and req.tool_name == "record_facts":
            return {"facts": [{"text": "?", "key": "user.x", "importance": 1, "source_seqs": [9]}]}
        return model(req)

    fake_llm.set_default(ToolUse(answer))
    sid = await facts_session(client)
    await talk(client, sid, ("2026-01-03T09:00:00Z", "I live in Paris."))
    await client.post(f"/v1/sessions/{sid}/memory/extract")
    await run_burst_worker(llm_settings_for_facts)
    failed = await status(client, sid)
    assert failed["status"] == "failed" and failed["watermark_seq"] == 2, failed
    assert [(f["first_seq"], f["last_seq"]) for f in failed["failed_ranges"]] == [(1, 2)]
    jobs = (await client.get("/v1/jobs", params={"kind": "facts"})).json()["items"]
    assert [j["status"] for j in jobs if j["session_id"] == sid] == ["failed"]
    # the session is not blocked: later messages are extracted
    await talk(client, sid, ("2026-02-03T09:00:00Z", "I prefer tea."))
    await client.post(f"/v1/sessions/{sid}/memory/extract")
    await run_burst_worker(llm_settings_for_facts)
    assert (await status(client, sid))["watermark_seq"] == 4
    assert [f["text"] for f in await scope_facts(client, "agent/agent-1")] == [
        "The user prefers tea in the morning."
    ]
    # the model is fixed: a retry call re-runs the failed range
    poisoned["on"] = False
    body = await extract(llm_client, sid, retry_failed="true")
    assert body["extraction"]["failed_ranges"] == [] and body["result"]["added"] == 1
    assert {f["text"] for f in await scope_facts(client, "agent/agent-1")} == {
        "The user prefers tea in the morning.",
        "The user lives in Paris.",
    }


async def test_a_race_lost_keeps_the_last_result(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    sid = await facts_session(llm_client)
    await talk(llm_client, sid, ("2026-01-03T09:00:00Z", "I live in Paris."))
    await extract(llm_client, sid)
    again = await extract(llm_client, sid)  # nothing left: as a run that lost a race
    assert again["result"]["batches"] == 0
    assert again["extraction"]["last_result"]["batches"] == 1
    assert again["extraction"]["last_result"]["added"] == 1


async def test_the_cron_pass_enqueues_lost_extractions(
    client: httpx.AsyncClient,
    settings: Settings,
    fake_llm: FakeLLMServer,
    llm_settings_for_facts: Settings,
    db: Any,
) -> None:
    from app.facts.tasks import recover_fact_extractions

    await drain_queue(settings)
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    sid = await facts_session(client)
    await talk(client, sid, ("2026-01-03T09:00:00Z", "I live in Paris."))
    await drain_queue(settings)  # the enqueue is lost (as with Redis down)
    await db.execute(
        sa.text(
            "UPDATE fact_extractions SET status = 'pending', updated_at = "
            "now() - interval '1 hour' WHERE session_id = :s"
        ),
        {"s": sid},
    )
    await db.commit()
    ctx: dict[str, Any] = {"settings": llm_settings_for_facts}
    await startup(ctx)
    try:
        out = await recover_fact_extractions(ctx)
        assert out["enqueued"] >= 1
    finally:
        await shutdown(ctx)
    await run_burst_worker(llm_settings_for_facts)
    done = await status(client, sid)
    assert done["status"] == "succeeded" and done["watermark_seq"] == 2, done
    assert [f["text"] for f in await scope_facts(client, "agent/agent-1")] == [
        "The user lives in Paris."
    ]


async def test_without_an_llm_the_reason_is_said(
    client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    settings: Settings,
    llm_settings_for_facts: Settings,
) -> None:
    llm = get_llm_client(llm_settings_for_facts)
    assert llm is not None
    try:
        with caplog.at_level(logging.WARNING, logger="loom.facts"):
            assert say_why_facts_wait(settings, None)
            assert not say_why_facts_wait(llm_settings_for_facts, llm)
    finally:
        await llm.aclose()
    assert [r.getMessage() for r in caplog.records] == [NO_LLM_LINE]
    sid = await facts_session(client)
    await talk(client, sid, ("2026-01-03T09:00:00Z", "I live in Paris."))
    r = await client.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true"})
    assert r.json()["extraction"]["status"] == "skipped"
    jobs = (await client.get("/v1/jobs", params={"kind": "facts"})).json()["items"]
    [job] = [j for j in jobs if j["session_id"] == sid]
    assert job["status"] == "skipped" and "no LLM configured" in job["last_error"]

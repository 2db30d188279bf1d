"""A due compression never waits for the cron pass (issue 27, finding 10).

Why it did: a compression asked for while a job of the session is running or finishing is
enqueued under the same job id, which arq drops while the job's key exists; the ask set
the job row to `pending` after the job had written `succeeded`, and every later append saw
`pending` (a queued job "covers" it) and enqueued nothing. Only the cron pass, two
intervals later, found the row pending and enqueued it. Now the ask is kept on the row and
the worker's `after_job_end` (app/jobs/followup.py) enqueues it once the job's key is gone.

The test appends in the worker's `on_job_end` hook: after the job's last look, before arq
deletes its key - the window in which the ask was lost."""

from __future__ import annotations

from typing import Any

import httpx
import redis.asyncio as aioredis
from arq.worker import Worker

from app.core.config import Settings
from app.core.redis import arq_settings
from app.jobs.followup import run_after_job
from app.jobs.lease import end_lease
from tests.fakes.llm_server import FakeLLMServer
from tests.jobs.support import (
    append,
    drain_queue,
    exchange,
    llm_settings,
    memory,
    new_session,
    run_burst_worker,
)
from workers.settings import compression_functions, shutdown, startup


async def test_an_ask_during_a_finishing_job_runs_without_the_cron(
    client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    sid = await new_session(client)
    for n in range(6):
        await append(client, sid, exchange(n, words=40))
    job = (await memory(client, sid))["compression"]
    assert job is not None and job["status"] == "pending", job  # the append enqueued it
    ends = 0

    async def messages_arrive_at_the_end(ctx: dict[str, Any]) -> None:
        nonlocal ends
        ends += 1
        if ends == 1:
            for n in range(6, 12):
                await append(client, sid, exchange(n, words=40))
            row = (await memory(client, sid))["compression"]
            assert row["status"] == "pending", row  # asked for, but arq dropped the enqueue
        await end_lease(ctx)

    worker_settings = llm_settings(settings, fake_llm)
    worker = Worker(
        functions=compression_functions(worker_settings),
        redis_settings=arq_settings(str(settings.redis_url)),
        queue_name=settings.queue_name,
        burst=True,
        poll_delay=0,
        ctx={"settings": worker_settings},
        on_startup=startup,
        on_shutdown=shutdown,
        on_job_end=messages_arrive_at_the_end,
        after_job_end=run_after_job,
        handle_signals=False,
        max_jobs=2,
    )
    try:
        await worker.main()
    finally:
        await worker.close()
    # the ask is in the queue the moment the job ended (a burst worker stops once the
    # queue looked empty while that job was still ending; a running worker polls it
    # within LOOM's poll delay)
    r = aioredis.Redis.from_url(str(settings.redis_url))
    try:
        assert await r.zscore(settings.queue_name, f"compress:{sid}") is not None
    finally:
        await r.aclose()
    await run_burst_worker(worker_settings)
    after = await memory(client, sid)
    assert after["compression"]["status"] == "succeeded", after["compression"]
    assert min(after["l1_seqs"]) > 12  # the messages of the end were compressed too

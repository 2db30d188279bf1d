"""Fault tests: a worker process SIGKILLed mid-job; Redis stopped under the API."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from app.core.config import Settings
from app.main import create_app
from app.memory.tasks import compress_busy_sessions
from tests.fakes.llm_server import FakeLLMServer
from tests.jobs.support import (
    FAKE_KEY,
    append,
    drain_queue,
    exchange,
    llm_settings,
    memory,
    new_session,
    run_burst_worker,
)
from tests.support.live import PrivateRedis
from tests.support.worker import worker_ctx

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


async def wait_for(predicate: Any, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def start_worker(settings: Settings, fake: FakeLLMServer) -> subprocess.Popen[bytes]:
    """`arq workers.settings.WorkerSettings` in its own process, on this run's queue."""
    assert settings.database_url and settings.redis_url
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "LOOM_QUEUE_NAME": settings.queue_name,
        "ANTHROPIC_API_KEY": FAKE_KEY,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "LOOM_LLM_PROVIDER": "anthropic",
        "LOOM_LLM_MAX_RETRIES": "0",
        "LOOM_LLM_TIMEOUT_SECONDS": "60",
        # a short lease, so the killed worker's job runs again soon (app/jobs/lease.py;
        # tests/faults/test_worker_faults.py checks the default bound)
        "LOOM_JOB_RECOVERY_SECONDS": "6",
        "LOOM_COMPRESS_RETRY_BASE_SECONDS": "0",
        "PYTHONPATH": str(ROOT),
    }
    arq = Path(sys.executable).with_name("arq")
    return subprocess.Popen(
        [str(arq), "workers.settings.WorkerSettings"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_worker_killed_mid_job_leaves_consistent_state_and_one_summary_per_range(
    client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer, db: Any
) -> None:
    await drain_queue(settings)
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    before = await memory(client, sid)
    fake_llm.hang()
    worker = start_worker(settings, fake_llm)
    try:
        await wait_for(lambda: _asked(fake_llm, sid), 30, "the worker to ask the LLM")
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
    # Nothing half-written: same L1, no summary, the job still shows as running.
    mid = await memory(client, sid)
    assert mid["l1_seqs"] == before["l1_seqs"] and mid["l2"] == []
    assert mid["compression"]["status"] == "running"

    fake_llm.reset()  # answers normally again (and releases the hung request)
    worker = start_worker(settings, fake_llm)
    try:

        async def done() -> Any:
            m = await memory(client, sid)
            return m if m["compression"]["status"] == "succeeded" and m["l2"] else None

        after = await wait_for(done, 60, "the restarted worker to finish the job")
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)
    assert after["compression"]["attempts"] >= 2
    assert all(s["method"] == "llm" for s in after["l2"])
    rows = (
        await db.execute(
            sa.text(
                "SELECT start_seq, end_seq FROM memory_summaries WHERE session_id = :s "
                "ORDER BY start_seq"
            ),
            {"s": sid},
        )
    ).all()
    # exactly one summary per range: contiguous from seq 1, no overlap, no duplicate
    assert rows[0][0] == 1
    for (_, end), (start, _) in zip(rows, rows[1:], strict=False):
        assert start == end + 1
    assert rows[-1][1] < min(after["l1_seqs"])


async def _asked(fake: FakeLLMServer, sid: str) -> bool:
    return bool(fake.requests)


# --- Redis stopped ---------------------------------------------------------------------


@pytest.fixture
def redis_server() -> Iterator[dict[str, Any]]:
    """A private redis-server on a free port that the test may stop and restart."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    server = PrivateRedis()
    yield {"port": server.port, "url": server.url, "start": server.start, "stop": server.stop}
    server.stop()


@pytest.fixture
async def redis_app(settings: Settings, redis_server: dict[str, Any]) -> AsyncIterator[Any]:
    """A second API instance whose Redis is the private server."""
    application = create_app(settings.model_copy(update={"redis_url": redis_server["url"]}))
    async with application.router.lifespan_context(application):
        yield application


async def test_redis_down_appends_and_context_still_work_and_cron_catches_up(
    tenant: Any,
    redis_app: Any,
    redis_server: dict[str, Any],
    settings: Settings,
    fake_llm: FakeLLMServer,
) -> None:
    api = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=redis_app),
        base_url="http://test",
        timeout=30,
        headers={"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "agent-1"},
    )
    try:
        sid = await new_session(api)
        redis_server["stop"]()
        timings = []
        for n in range(10):
            started = time.monotonic()
            await append(api, sid, exchange(n, words=40))
            ctx = await api.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})
            timings.append(time.monotonic() - started)
            assert ctx.status_code == 200, ctx.text
            body = ctx.json()
            assert body["total_tokens"] <= body["budget"]
        # no request hung on the dead Redis (a liveness bound, not a speed target)
        print(f"append+context with Redis down: max {max(timings):.3f}s, first {timings[0]:.3f}s")
        assert max(timings) < 5, timings
        mem = await memory(api, sid)
        assert mem["l2"] == [] and mem["compression_due"]
        assert mem["compression"]["status"] == "pending"
        assert "queue unavailable" in mem["compression"]["last_error"]

        redis_server["start"]()
        s = llm_settings(settings, fake_llm).model_copy(update={"redis_url": redis_server["url"]})
        async with redis_app.state.loom.db_connection() as conn:  # the lost job is old now
            await conn.execute(
                "UPDATE compression_jobs SET updated_at = now() - interval '1 hour' "
                "WHERE tenant_id = $1 AND session_id = $2",
                uuid.UUID(tenant.id),
                uuid.UUID(sid),
            )
        async with worker_ctx(s) as cron_ctx:
            result = await compress_busy_sessions(cron_ctx)
        assert result["enqueued"] >= 1
        await run_burst_worker(s)
        mem = await memory(api, sid)
        assert mem["l2"] and all(x["method"] == "llm" for x in mem["l2"])
        assert mem["compression"]["status"] == "succeeded"
        ctx = (await api.post(f"/v1/sessions/{sid}/context", json={})).json()
        assert ctx["total_tokens"] <= ctx["budget"]
    finally:
        await api.aclose()

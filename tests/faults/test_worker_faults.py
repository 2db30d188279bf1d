"""Redis and worker faults: /readyz follows Redis; `loom-memory worker` rides out a Redis
outage (compression resumes with no restart by hand); `serve` restarts a killed worker
child; a job whose worker was SIGKILLed runs again within LOOM_JOB_RECOVERY_SECONDS at
default settings, with no overlapping summaries.

Workers are real processes (`python -m app.launcher.cli worker`) on the run's test database and a
private redis-server; the LLM is the fake server, slowed or hung where a job must be
caught mid-flight."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import psutil
import pytest
import sqlalchemy as sa
from redis.asyncio import Redis

from app.core.config import Settings
from app.main import create_app
from tests.fakes.llm_server import FakeLLMServer
from tests.jobs.support import FAKE_KEY, append, exchange, memory, new_session
from tests.support.live import ROOT, PrivateRedis, free_port, settings_env

pytestmark = pytest.mark.slow

DEFAULTS = Settings()


async def wait_for(predicate: Any, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        await asyncio.sleep(0.2)


def worker_env(
    settings: Settings, redis: PrivateRedis, fake: FakeLLMServer, **extra: str
) -> dict[str, str]:
    """Default job settings (no shortened timeouts), the fake LLM, the private Redis."""
    env = settings_env(
        settings,
        REDIS_URL=redis.url,
        ANTHROPIC_API_KEY=FAKE_KEY,
        ANTHROPIC_BASE_URL=fake.base_url,
        LOOM_LLM_PROVIDER="anthropic",
        LOOM_LLM_MAX_RETRIES="0",
        LOOM_LLM_TIMEOUT_SECONDS="60",
        PYTHONPATH=str(ROOT),
    )
    for name in [k for k in env if k.startswith(("LOOM_COMPRESS_", "LOOM_JOB_", "LOOM_WORKER_"))]:
        del env[name]
    env.update(extra)
    return env


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A worker process; its log goes to a temporary file (`log_tail` reads it)."""
    log = tempfile.NamedTemporaryFile(prefix="loom-worker-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.launcher.cli", "worker"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proc.log_path = log.name  # type: ignore[attr-defined]
    log.close()
    return proc


def log_tail(proc: subprocess.Popen[bytes] | None, lines: int = 40) -> str:
    path = getattr(proc, "log_path", None)
    if not path or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    path = getattr(proc, "log_path", None)
    if path and os.path.exists(path):
        os.unlink(path)


@pytest.fixture
async def redis_api(
    settings: Settings, tenant: Any, private_redis: PrivateRedis
) -> AsyncIterator[httpx.AsyncClient]:
    """An API on the test database whose Redis is the private server; the tenant's
    service client."""
    application = create_app(settings.model_copy(update={"redis_url": private_redis.url}))
    async with application.router.lifespan_context(application):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application),
            base_url="http://test",
            timeout=30,
            headers={"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "agent-1"},
        ) as c:
            yield c


@pytest.fixture
def redis_running(private_redis: PrivateRedis) -> Iterator[PrivateRedis]:
    """The private Redis, started again after a test that stopped it, and emptied."""
    yield private_redis
    if private_redis.proc is None:
        private_redis.start()


async def _summarised(api: httpx.AsyncClient, sid: str) -> Any:
    m = await memory(api, sid)
    return m if m["l2"] and m["compression"]["status"] == "succeeded" else None


async def _make_busy(api: httpx.AsyncClient, sid: str, n: int = 8) -> None:
    for i in range(n):
        await append(api, sid, exchange(i, words=40))


async def test_readyz_follows_redis(
    redis_api: httpx.AsyncClient, redis_running: PrivateRedis
) -> None:
    assert (await redis_api.get("/readyz")).status_code == 200
    redis_running.stop()
    started = time.monotonic()
    r = await redis_api.get("/readyz")
    down = time.monotonic() - started
    assert r.status_code == 503 and r.json()["error"]["details"]["redis"] != "ok", r.text
    assert r.json()["error"]["details"]["database"] == "ok"
    assert down <= DEFAULTS.ready_timeout_seconds + 1, down
    redis_running.start()
    back_at = time.monotonic()

    async def ready() -> bool:
        return (await redis_api.get("/readyz")).status_code == 200

    await wait_for(ready, 2, "/readyz 200 after Redis is back")
    print(
        f"/readyz with Redis down: 503 in {down:.2f}s; 200 again "
        f"{time.monotonic() - back_at:.2f}s after it is back"
    )


async def test_worker_rides_out_a_redis_outage(
    redis_api: httpx.AsyncClient,
    settings: Settings,
    redis_running: PrivateRedis,
    fake_llm: FakeLLMServer,
) -> None:
    health = settings.queue_name + ":health-check"  # arq writes it on its first poll
    store = Redis.from_url(redis_running.url)
    await store.delete(health)
    worker = start_worker(worker_env(settings, redis_running, fake_llm))
    try:
        sid = await new_session(redis_api)

        async def polling() -> bool:
            return bool(await store.exists(health)) or worker.poll() is not None

        await wait_for(polling, 30, "the worker to poll the queue")  # up and polling
        assert worker.poll() is None, log_tail(worker)
        redis_running.stop()
        stopped = time.monotonic()
        await _make_busy(redis_api, sid)  # enqueues fail: the jobs stay pending
        mem = await memory(redis_api, sid)
        assert mem["l2"] == [] and mem["compression_due"]
        await asyncio.sleep(max(0.0, 15 - (time.monotonic() - stopped)))
        assert worker.poll() is None, f"the worker exited ({worker.returncode})"
        redis_running.start()
        back_at = time.monotonic()
        try:
            await wait_for(
                lambda: _summarised(redis_api, sid),
                40,
                "the worker to compress the busy session after Redis is back",
            )
        except AssertionError:
            print(log_tail(worker))
            raise
        took = time.monotonic() - back_at
        assert worker.poll() is None
        print(
            f"Redis down {back_at - stopped:.1f}s: same worker compressed the busy "
            f"session {took:.1f}s after Redis was back"
        )
    finally:
        await store.aclose()
        stop(worker)


async def test_dead_worker_job_runs_again_within_the_recovery_bound(
    redis_api: httpx.AsyncClient,
    settings: Settings,
    redis_running: PrivateRedis,
    fake_llm: FakeLLMServer,
    db: Any,
) -> None:
    """Default settings (a 300 s job timeout): the job of a SIGKILLed worker is not held
    by arq's 310 s lock but by a lease of LOOM_JOB_RECOVERY_SECONDS."""
    env = worker_env(settings, redis_running, fake_llm)
    fake_llm.hang()  # the first worker is caught mid-job, waiting on the LLM
    first = start_worker(env)
    second = None
    try:
        sid = await new_session(redis_api)
        await _make_busy(redis_api, sid)

        async def asked() -> bool:
            return bool(fake_llm.requests)

        await wait_for(asked, 30, "the worker to ask the LLM")
        before = await memory(redis_api, sid)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        killed = time.monotonic()
        mid = await memory(redis_api, sid)
        assert mid["l1_seqs"] == before["l1_seqs"] and mid["l2"] == []
        assert mid["compression"]["status"] == "running"
        fake_llm.reset()  # answers again
        second = start_worker(env)
        after = await wait_for(
            lambda: _summarised(redis_api, sid),
            DEFAULTS.job_recovery_seconds + 15,
            "the new worker to run the dead worker's job",
        )
        took = time.monotonic() - killed
        print(
            f"dead worker's job done {took:.1f}s after the kill "
            f"(LOOM_JOB_RECOVERY_SECONDS={DEFAULTS.job_recovery_seconds:g})"
        )
        assert took <= DEFAULTS.job_recovery_seconds + 5, took
    finally:
        for proc in (first, second):
            if proc is not None:
                stop(proc)
    assert after["compression"]["attempts"] >= 2
    rows = (
        await db.execute(
            sa.text(
                "SELECT start_seq, end_seq, method FROM memory_summaries WHERE session_id = :s "
                "ORDER BY start_seq"
            ),
            {"s": sid},
        )
    ).all()
    assert rows and rows[0][0] == 1 and all(r[2] == "llm" for r in rows)
    for (_, end, _), (start, _, _) in zip(rows, rows[1:], strict=False):
        assert start == end + 1  # contiguous: no overlap, no duplicate
    assert rows[-1][1] < min(after["l1_seqs"])


def _worker_children(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    out = []
    for c in children:
        try:
            if c.status() != psutil.STATUS_ZOMBIE and "worker" in c.cmdline():
                out.append(c)
        except psutil.NoSuchProcess:
            pass
    return out


async def test_serve_restarts_a_killed_worker(
    settings: Settings, redis_running: PrivateRedis, fake_llm: FakeLLMServer
) -> None:
    port = free_port()
    env = worker_env(settings, redis_running, fake_llm, LOOM_RUN_WORKER="true")
    log = tempfile.NamedTemporaryFile(prefix="loom-serve-", suffix=".log", delete=False)
    serve = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-m", "app.launcher.cli", "serve", "--port", str(port), "--workers", "1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    serve.log_path = log.name  # type: ignore[attr-defined]
    log.close()
    new: list[psutil.Process] = []
    try:

        async def up() -> list[psutil.Process]:
            try:
                async with httpx.AsyncClient(timeout=1) as c:
                    ok = (await c.get(f"http://127.0.0.1:{port}/healthz")).status_code
            except httpx.HTTPError:
                return []
            return _worker_children(serve.pid) if ok == 200 else []

        children = await wait_for(up, 60, "serve and its worker")
        assert len(children) == 1
        old = children[0].pid
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()

        async def replaced() -> list[psutil.Process]:
            return [c for c in _worker_children(serve.pid) if c.pid != old]

        new = await wait_for(replaced, 10, "serve to start a new worker")
        took = time.monotonic() - killed
        await asyncio.sleep(2)
        assert new[0].is_running() and new[0].status() != psutil.STATUS_ZOMBIE
        print(f"serve restarted its killed worker in {took:.2f}s")
    finally:
        serve.terminate()
        try:
            serve.wait(40)  # noqa: ASYNC101
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
            raise AssertionError("serve did not stop:\n" + log_tail(serve)) from None
        finally:
            output = log_tail(serve, 60)
            stop(serve)  # removes the log
    # SIGTERM ran serve's cleanup (uvicorn raises the signal again once it has stopped),
    # which stopped the worker it supervised before exiting
    assert output.rstrip().splitlines()[-1] == "stopped", output
    for proc in new:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, output

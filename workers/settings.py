"""arq worker settings: shares the app's settings, database and Redis code.

Job functions live with their domain (`app/<domain>/tasks.py`) and are listed here.
`run_forever` is how `loom-memory worker` runs them: a worker that loses Redis (or fails
to start) is closed and started again with backoff, until SIGTERM / SIGINT. Each running
job holds a renewed lease (app/jobs/lease.py), so a dead worker's job runs again within
`LOOM_JOB_RECOVERY_SECONDS`.
"""

import asyncio
import logging
import signal
import time
from typing import Any

from arq import cron  # noqa: F401  (domains add cron jobs below)
from arq.worker import Worker, create_worker, func

from app import wiring
from app.core import pg, tracing
from app.core.config import WORKER_CONNECTIONS, Settings, get_settings
from app.core.queue import Queue
from app.core.redis import arq_settings, create_redis
from app.erasure.service import ERASE_JOB
from app.erasure.tasks import erase, resume_erasures
from app.facts.startup import say_why_facts_wait
from app.facts.tasks import EXTRACT_JOB, extract_facts, recover_fact_extractions
from app.jobs.followup import run_after_job
from app.jobs.lease import end_lease, start_lease
from app.llm.client import get_llm_client
from app.manifests.tasks import sweep_context_manifests
from app.memory.tasks import compress_busy_sessions, compress_session
from app.shared_memory.tasks import cleanup_expired_shared_memory
from app.state import WORKER_STATE, WorkerState
from app.usage.service import resume_budget_waits

log = logging.getLogger("loom.worker")


async def startup(ctx: dict[str, Any]) -> None:
    """Build the worker's state (`app.state.WorkerState`) once: the same settings and
    configuration as an API process's lifespan (`app.wiring`). Tests
    (in-process burst workers) pass their own settings in ctx."""
    settings = ctx.get("settings") or get_settings()
    if not settings.database_url or not settings.redis_url:
        raise RuntimeError("DATABASE_URL and REDIS_URL must be set for the worker")
    wiring.configure(settings)
    tracing.configure(settings.otel, settings.otel_content)  # OTEL_* variables (app.core.tracing)
    db = await pg.create_pool(
        settings.database_url, settings, size=WORKER_CONNECTIONS, generic_plans=False
    )
    redis = create_redis(settings.redis_url)
    try:
        state = WorkerState(
            settings=settings,
            db=db,
            redis=redis,
            queue=Queue(arq_settings(settings.redis_url), settings.queue_name),
            llm=get_llm_client(settings),  # None = heuristic summaries
        )
    except BaseException:
        await redis.aclose()
        await pg.close(db)
        raise
    ctx[WORKER_STATE] = state
    wiring.meter_llm(state.llm, state.db_connection, settings)  # the LLM cost ledger and budgets
    say_why_facts_wait(settings, state.llm)
    _start_metrics_server(settings.worker_metrics_port)


async def shutdown(ctx: dict[str, Any]) -> None:
    state: WorkerState | None = ctx.pop(WORKER_STATE, None)
    if state is None:
        return
    if state.llm is not None:
        await state.llm.aclose()
    await state.queue.close()
    await state.redis.aclose()
    await pg.close(state.db)
    tracing.shutdown()


async def ping(ctx: dict[str, Any]) -> str:
    """A no-op job: proves the worker is alive and reading the queue."""
    return "pong"


_metrics_started: set[int] = set()


def _start_metrics_server(port: int | None) -> None:
    """A worker serves Prometheus metrics on its own port (once per process): its own, or
    every process's of its multi-process directory (app.core.metrics)."""
    if port and port not in _metrics_started:
        from prometheus_client import start_http_server

        from app.core.metrics import registry

        start_http_server(port, registry=registry())
        _metrics_started.add(port)


def compression_functions(settings: Settings) -> list[Any]:
    """The compression job with its timeout/tries from settings (arq retries via Retry);
    keep_result=0 so a finished job never blocks the next enqueue under the same id."""
    return [
        func(
            tracing.job(compress_session),
            name="compress_session",
            keep_result=0,
            max_tries=settings.compress_max_tries,
            timeout=settings.compress_job_timeout_seconds + 5,
        )
    ]


def facts_functions(settings: Settings) -> list[Any]:
    """The fact extraction job: retried by its own backoff up to
    LOOM_FACTS_MAX_TRIES, one per session (job id `facts:<session>`)."""
    return [
        func(
            tracing.job(extract_facts),
            name=EXTRACT_JOB,
            keep_result=0,
            max_tries=settings.facts_max_tries + 1,
            timeout=settings.facts_job_timeout_seconds + 5,
        )
    ]


def erasure_functions(settings: Settings) -> list[Any]:
    """The erasure job: resumable, so a retry or a rerun after a killed worker
    goes on where the last one stopped; keep_result=0 lets the sweep queue it again."""
    return [
        func(
            tracing.job(erase),
            name=ERASE_JOB,
            keep_result=0,
            max_tries=1000,
            timeout=max(3600, settings.worker_job_timeout_seconds),
        )
    ]


def erasure_cron(settings: Settings) -> Any:
    """The sweep resuming erasures whose runner died, every few seconds."""
    every = max(1, min(30, int(settings.erasure_recovery_seconds // 2) or 1))
    return cron(resume_erasures, second=set(range(0, 60, every)), run_at_startup=True, unique=True)


def compression_cron(settings: Settings) -> Any:
    """The busy-session pass, every LOOM_COMPRESS_CRON_SECONDS."""
    return cron(
        compress_busy_sessions,
        second=set(range(0, 60, settings.compress_cron_seconds)),
        run_at_startup=True,
        unique=True,
    )


def worker_settings(settings: Settings) -> type[Any]:
    """The arq worker settings of `settings` (a class, as arq takes one): its jobs, crons,
    hooks, queue and limits. Made when asked for, not at import: importing this module
    reads no environment."""

    class WorkerSettings:
        functions: list[Any] = [
            ping,
            *compression_functions(settings),
            *facts_functions(settings),
            *erasure_functions(settings),
        ]
        cron_jobs: list[Any] = [
            cron(cleanup_expired_shared_memory, second={0, 30}, run_at_startup=True, unique=True),
            compression_cron(settings),
            cron(
                recover_fact_extractions,
                second=set(range(0, 60, settings.compress_cron_seconds)),
                unique=True,
            ),
            erasure_cron(settings),
            # fact extractions that waited for a tenant's daily token budget (app/usage)
            cron(resume_budget_waits, second={15}, unique=True),
            cron(
                sweep_context_manifests,
                unique=True,
                run_at_startup=True,
                second=set(range(0, 60, settings.context_manifests_sweep_seconds)),
            ),
        ]
        on_startup = startup
        on_shutdown = shutdown
        on_job_start = start_lease
        on_job_end = end_lease
        after_job_end = run_after_job  # work asked for while a job ran (app/jobs/followup.py)
        redis_settings = arq_settings(settings.redis_url) if settings.redis_url else None
        queue_name = settings.queue_name
        max_jobs = 10
        job_timeout = settings.worker_job_timeout_seconds
        max_tries = 5
        keep_result = 60
        # the report GET /v1/jobs shows as worker liveness (its key lives one interval + 1 s)
        health_check_interval = 10

    return WorkerSettings


def __getattr__(name: str) -> Any:
    """`workers.settings.WorkerSettings` (what `arq workers.settings.WorkerSettings` asks
    for): the settings of this process's environment, read when asked for."""
    if name == "WorkerSettings":
        return worker_settings(get_settings())
    raise AttributeError(name)


# --- running: ride out Redis outages ----------------------------------------------------

# a worker that ran this long before failing starts again without waiting
HEALTHY_RUN_SECONDS = 60.0
FIRST_BACKOFF_SECONDS = 0.5


async def _close(worker: Worker) -> None:
    """Close a worker whose Redis may be gone: cancel its jobs (they run again later: see
    app/jobs/lease.py), run its shutdown hook, drop its pool; never raise."""
    tasks = [t for t in worker.tasks.values() if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:  # bounded: a cancel racing a redis-py timeout can be swallowed (Python 3.11)
        await asyncio.wait(tasks, timeout=5)
    if worker.on_shutdown is not None:
        try:
            await worker.on_shutdown(worker.ctx)
        except Exception:
            log.exception("worker shutdown hook failed")
    pool = worker.pool  # None when it never connected
    if pool is not None:
        try:
            await pool.aclose(close_connection_pool=True)
        except Exception:
            pass


async def run_forever(settings_cls: Any = None, *, max_backoff: float | None = None) -> None:
    """Run arq workers until SIGTERM / SIGINT. When a worker stops on an error (Redis
    unreachable, a failed start), it is closed and a new one starts after a backoff that
    doubles from 0.5 s up to `LOOM_WORKER_RECONNECT_MAX_SECONDS`; each start runs the
    cron jobs marked run-at-startup again (the busy-session pass catches up at once)."""
    settings_cls = settings_cls or worker_settings(get_settings())
    if max_backoff is None:
        max_backoff = get_settings().worker_reconnect_max_seconds
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    current: dict[str, Worker] = {}

    def _stop(sig: signal.Signals) -> None:
        log.info("worker stopping on %s", sig.name)
        stopping.set()
        worker = current.get("worker")
        if worker is not None:
            worker.handle_sig(sig)  # cancels its jobs and its main task

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, _stop, sig)
    backoff = FIRST_BACKOFF_SECONDS
    try:
        while not stopping.is_set():
            worker = create_worker(settings_cls, handle_signals=False)
            for job in worker.cron_jobs:  # run-at-startup crons run again on this start
                job.next_run = None
            current["worker"] = worker
            started = time.monotonic()
            worker.main_task = asyncio.create_task(worker.main())
            try:
                await worker.main_task
                error = "stopped"
            except asyncio.CancelledError:
                if not stopping.is_set():
                    raise
                error = "cancelled"
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:200]
            finally:
                await _close(worker)
                current.pop("worker", None)
            if stopping.is_set():
                break
            if time.monotonic() - started > HEALTHY_RUN_SECONDS:
                backoff = FIRST_BACKOFF_SECONDS
            log.warning("worker stopped (%s); starting again in %.1fs", error, backoff)
            try:
                await asyncio.wait_for(stopping.wait(), backoff)
            except TimeoutError:
                pass
            backoff = min(max_backoff, backoff * 2)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)

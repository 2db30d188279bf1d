"""arq worker settings: shares the app's settings, database and Redis code.

Job functions live with their domain (`app/<domain>/tasks.py`) and are listed here.
"""

import logging
from typing import Any

from arq import cron  # noqa: F401  (domains add cron jobs below)
from arq.worker import func

from app.core.config import get_settings
from app.core.db import create_engine, create_sessionmaker
from app.core.queue import Queue
from app.core.redis import arq_settings, create_redis
from app.llm.client import get_llm_client
from app.memory.tasks import compress_busy_sessions, compress_session
from app.shared_memory.tasks import cleanup_expired_shared_memory

log = logging.getLogger("loom.worker")


async def startup(ctx: dict[str, Any]) -> None:
    # Tests (in-process burst workers) pass their own settings in ctx.
    settings = ctx.get("settings") or get_settings()
    if not settings.database_url or not settings.redis_url:
        raise RuntimeError("DATABASE_URL and REDIS_URL must be set for the worker")
    ctx["settings"] = settings
    ctx["engine"] = create_engine(settings.database_url, pool_size=4)
    ctx["sessionmaker"] = create_sessionmaker(ctx["engine"])
    ctx["redis_client"] = create_redis(settings.redis_url)
    ctx["queue"] = Queue(arq_settings(settings.redis_url), settings.queue_name)
    ctx["llm"] = get_llm_client(settings)  # None = heuristic summaries
    _start_metrics_server(settings.worker_metrics_port)


async def shutdown(ctx: dict[str, Any]) -> None:
    if ctx.get("llm") is not None:
        await ctx["llm"].aclose()
    if "queue" in ctx:
        await ctx["queue"].close()
    if "redis_client" in ctx:
        await ctx["redis_client"].aclose()
    if "engine" in ctx:
        await ctx["engine"].dispose()


async def ping(ctx: dict[str, Any]) -> str:
    """A no-op job: proves the worker is alive and reading the queue."""
    return "pong"


_metrics_started: set[int] = set()


def _start_metrics_server(port: int | None) -> None:
    """A separate worker process serves its own Prometheus counters (once per process)."""
    if port and port not in _metrics_started:
        from prometheus_client import start_http_server

        start_http_server(port)
        _metrics_started.add(port)


def compression_functions(settings: Any) -> list[Any]:
    """The compression job with its timeout/tries from settings (arq retries via Retry);
    keep_result=0 so a finished job never blocks the next enqueue under the same id."""
    return [func(compress_session, name="compress_session", keep_result=0,
                 max_tries=settings.compress_max_tries,
                 timeout=settings.compress_job_timeout_seconds + 5)]


def compression_cron(settings: Any) -> Any:
    """The busy-session pass, every LOOM_COMPRESS_CRON_SECONDS."""
    return cron(compress_busy_sessions, second=set(range(0, 60, settings.compress_cron_seconds)),
                run_at_startup=True, unique=True)


def _redis_settings() -> Any:
    url = get_settings().redis_url
    return arq_settings(url) if url else None


class WorkerSettings:
    functions: list[Any] = [ping, *compression_functions(get_settings())]
    cron_jobs: list[Any] = [
        cron(cleanup_expired_shared_memory, second={0, 30}, run_at_startup=True, unique=True),
        compression_cron(get_settings()),
    ]
    on_startup = startup
    on_shutdown = shutdown
    redis_settings = _redis_settings()
    queue_name = get_settings().queue_name
    max_jobs = 10
    job_timeout = get_settings().worker_job_timeout_seconds
    max_tries = 5
    keep_result = 60

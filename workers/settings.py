"""arq worker settings: shares the app's settings, database and Redis code.

Job functions live with their domain (`app/<domain>/tasks.py`) and are listed here.
"""

import logging
from typing import Any

from arq import cron  # noqa: F401  (domains add cron jobs below)

from app.core.config import get_settings
from app.core.db import create_engine, create_sessionmaker
from app.core.queue import Queue
from app.core.redis import arq_settings, create_redis
from app.shared_memory.tasks import cleanup_expired_shared_memory

log = logging.getLogger("loom.worker")


async def startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    if not settings.database_url or not settings.redis_url:
        raise RuntimeError("DATABASE_URL and REDIS_URL must be set for the worker")
    ctx["settings"] = settings
    ctx["engine"] = create_engine(settings.database_url, pool_size=4)
    ctx["sessionmaker"] = create_sessionmaker(ctx["engine"])
    ctx["redis_client"] = create_redis(settings.redis_url)
    ctx["queue"] = Queue(arq_settings(settings.redis_url), settings.queue_name)


async def shutdown(ctx: dict[str, Any]) -> None:
    if "queue" in ctx:
        await ctx["queue"].close()
    if "redis_client" in ctx:
        await ctx["redis_client"].aclose()
    if "engine" in ctx:
        await ctx["engine"].dispose()


async def ping(ctx: dict[str, Any]) -> str:
    """A no-op job: proves the worker is alive and reading the queue."""
    return "pong"


def _redis_settings() -> Any:
    url = get_settings().redis_url
    return arq_settings(url) if url else None


class WorkerSettings:
    functions: list[Any] = [ping]
    cron_jobs: list[Any] = [
        cron(cleanup_expired_shared_memory, second={0, 30}, run_at_startup=True, unique=True),
    ]
    on_startup = startup
    on_shutdown = shutdown
    redis_settings = _redis_settings()
    queue_name = get_settings().queue_name
    max_jobs = 10
    job_timeout = 300
    max_tries = 5
    keep_result = 60

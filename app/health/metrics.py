"""Gauges of an API process's stores: its connection pools and whether Redis answers.

Pool gauges are per process and summed over the live API processes of a multi-process
directory (`livesum`, see `app.core.metrics`); each process sets its own every
`REFRESH_SECONDS` and when it serves a scrape, so a scrape of one process sees the others'
pools at most that old. `loom_redis_up` is the PING of the latest scrape (`mostrecent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import Gauge

from app.core import metrics
from app.state import AppState

log = logging.getLogger("loom.metrics")

REFRESH_SECONDS = 5.0

POOL_OPEN = Gauge(
    "loom_db_pool_open_connections",
    "Open database connections of the API processes, by pool (asyncpg: the "
    "hot paths; routes: the other routes).",
    ["pool"],
    multiprocess_mode="livesum",
)
POOL_IDLE = Gauge(
    "loom_db_pool_idle_connections",
    "Open database connections waiting in the pool, by pool.",
    ["pool"],
    multiprocess_mode="livesum",
)
POOL_IN_USE = Gauge(
    "loom_db_pool_in_use_connections",
    "Database connections held by requests, by pool.",
    ["pool"],
    multiprocess_mode="livesum",
)
POOL_MAX = Gauge(
    "loom_db_pool_max_connections",
    "Most connections the pools may open (LOOM_DB_POOL_SIZE, and half as many and "
    "half again for the other routes), by pool.",
    ["pool"],
    multiprocess_mode="livesum",
)
REDIS_UP = Gauge(
    "loom_redis_up",
    "1 when Redis answered a PING at the latest scrape, else 0.",
    multiprocess_mode="mostrecent",
)


def _set(pool: str, open_: int, idle: int, max_: int) -> None:
    POOL_OPEN.labels(pool).set(open_)
    POOL_IDLE.labels(pool).set(idle)
    POOL_IN_USE.labels(pool).set(open_ - idle)
    POOL_MAX.labels(pool).set(max_)


def refresh_pools(state: AppState) -> None:
    """Set this process's pool gauges from the pools (no I/O)."""
    # "asyncpg": the hot paths' pool; "routes": every other route's (app.core.db)
    for name, pool in (("asyncpg", state.pg), ("routes", state.db)):
        _set(name, pool.get_size(), pool.get_idle_size(), pool.get_max_size())


async def refresh(state: AppState) -> None:
    """Before a scrape: this process's pools, and a PING of Redis."""
    refresh_pools(state)
    try:
        async with asyncio.timeout(state.settings.ready_timeout_seconds):
            await state.redis.ping()
        REDIS_UP.set(1)
    except Exception:
        REDIS_UP.set(0)


class PoolGauges:
    """Keeps this process's pool gauges current while the app runs (a task of the
    lifespan), and forgets the gauges of API processes that died."""

    def __init__(self, state: AppState) -> None:
        self.state = state
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="pool-gauges")

    async def _run(self) -> None:
        while True:
            try:
                refresh_pools(self.state)
                metrics.sweep_dead_processes()
            except Exception:
                log.exception("refreshing the pool gauges failed")
            await asyncio.sleep(REFRESH_SECONDS)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

"""The one place that talks to the job queue (arq today; kept replaceable).

Enqueueing never fails a request: with Redis down it logs and returns False, and the
periodic passes pick the work up when Redis is back.
"""

import logging
import time
from typing import Any, NamedTuple

from arq.connections import ArqRedis, create_pool
from arq.constants import health_check_key_suffix
from redis.asyncio import Redis

from app.core import tracing

log = logging.getLogger("loom.queue")


class Queue:
    def __init__(self, redis_settings: Any, queue_name: str = "arq:queue") -> None:
        self._settings = redis_settings
        self.queue_name = queue_name
        self._pool: ArqRedis | None = None
        # After a failure, skip Redis for a short while so requests do not each pay a
        # connect timeout while it is down.
        self._down_until = 0.0
        self.retry_after_seconds = 5.0

    async def _get_pool(self) -> ArqRedis:
        if self._pool is None:
            self._pool = await create_pool(self._settings)
        return self._pool

    async def enqueue(
        self, job_name: str, *args: Any, _job_id: str | None = None, _defer_by: float | None = None
    ) -> bool:
        if time.monotonic() < self._down_until:
            return False
        try:
            pool = await self._get_pool()
            job = await pool.enqueue_job(
                job_name,
                *args,
                _job_id=_job_id,
                _defer_by=_defer_by,
                _queue_name=self.queue_name,
                **tracing.carry(),  # the job continues the caller's trace (app.core.tracing)
            )
            return job is not None or _job_id is not None
        except Exception as exc:  # Redis down: degrade, never fail the caller
            log.warning("enqueue of %s failed: %s", job_name, type(exc).__name__)
            self._pool = None
            self._down_until = time.monotonic() + self.retry_after_seconds
            return False

    async def schedule(self, job_name: str, *args: Any, _job_id: str, _defer_by: float) -> bool:
        """Run the job `_defer_by` seconds from now: enqueue it, or move the queued job of
        that id to that time (a debounce: each call sets the time again). A job already
        running is left alone (its end looks for work that arrived meanwhile)."""
        if time.monotonic() < self._down_until:
            return False
        try:
            pool = await self._get_pool()
            job = await pool.enqueue_job(
                job_name,
                *args,
                _job_id=_job_id,
                _defer_by=_defer_by or None,
                _queue_name=self.queue_name,
                **tracing.carry(),
            )
            if job is None:
                score = int((time.time() + max(0.0, _defer_by)) * 1000)
                await pool.zadd(self.queue_name, {_job_id: score}, xx=True)
            return True
        except Exception as exc:  # Redis down: degrade, never fail the caller
            log.warning("schedule of %s failed: %s", job_name, type(exc).__name__)
            self._pool = None
            self._down_until = time.monotonic() + self.retry_after_seconds
            return False

    async def close(self) -> None:
        if self._pool is not None:
            try:
                await self._pool.aclose()
            except Exception:
                pass
            self._pool = None


class QueueHealth(NamedTuple):
    """How the queue stands: the jobs waiting, and the workers' latest health report (arq's
    `<queue>:health-check` key; None when no worker reported within its expiry)."""

    depth: int
    worker_report: str | None


async def queue_health(redis: Redis, queue_name: str) -> QueueHealth | None:
    """The queue's depth and the workers' latest health report in one round trip, read
    from the keys arq keeps; None while Redis does not answer."""
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.zcard(queue_name)
            pipe.get(queue_name + health_check_key_suffix)
            depth, report = await pipe.execute()
    except Exception:
        return None
    text = report.decode() if isinstance(report, bytes) else report
    return QueueHealth(int(depth), text)


async def enqueue(
    holder: Any,
    job_name: str,
    *args: Any,
    _job_id: str | None = None,
    _defer_by: float | None = None,
) -> bool:
    """Enqueue through a Queue or the queue of a started app (a job passes its
    `worker_state(ctx).queue`)."""
    if isinstance(holder, Queue):
        queue: Queue | None = holder
    else:
        loom = getattr(getattr(holder, "state", None), "loom", None)
        queue = getattr(loom, "queue", None)
    if queue is None:
        log.warning("no queue configured; %s not enqueued", job_name)
        return False
    return await queue.enqueue(job_name, *args, _job_id=_job_id, _defer_by=_defer_by)

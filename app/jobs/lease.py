"""A lease on each running arq job, so a job whose worker died runs again within
`LOOM_JOB_RECOVERY_SECONDS` (30) instead of arq's longest job timeout + 10 s (315 s).

arq marks a started job with the key `arq:in-progress:<job id>`, set once with an expiry of
the longest job timeout + 10 s; while it exists no other worker starts the job, and the
job stays in the queue until it finishes. The hooks here (the worker's `on_job_start` /
`on_job_end`) replace that long lock with a short lease holding a token of this run,
renewed every third of its length while the job runs. A killed worker stops renewing, the
lease expires, and the next worker polling the queue runs the job again (a new try).

Running a job twice at once stays impossible in effect: if this worker cannot renew in time
(Redis unreachable longer than the lease) and another worker has taken the job meanwhile,
the renewal sees the other token and sets `ctx["lease_lost"]`; compression checks it before
each write and stops (and in any case its apply re-checks the memory state version under a
row lock, so a range is never summarised twice).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from arq.constants import in_progress_key_prefix

from app.core.config import Settings
from app.state import worker_state

log = logging.getLogger("loom.jobs.lease")

# the lease is this much shorter than the recovery bound: the next worker's poll and its
# start of the job fit in the rest
RECOVERY_MARGIN_SECONDS = 5.0
MIN_LEASE_SECONDS = 2.0

# renew if the lease is still ours; take it again if it expired and nobody took it
_RENEW = """
local v = redis.call('get', KEYS[1])
if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
if not v then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 2 end
return 0
"""


def lease_seconds(settings: Settings) -> float:
    return max(MIN_LEASE_SECONDS, settings.job_recovery_seconds - RECOVERY_MARGIN_SECONDS)


def lease_lost(ctx: dict[str, Any]) -> bool:
    """True once another worker has taken over this job (stop before writing)."""
    return bool(ctx.get("lease_lost"))


async def start_lease(ctx: dict[str, Any]) -> None:
    """arq `on_job_start`: swap arq's long in-progress lock for a renewed short lease."""
    redis = ctx.get("redis")
    job_id = ctx.get("job_id")
    if redis is None or not job_id:
        return
    seconds = lease_seconds(worker_state(ctx).settings)
    key = in_progress_key_prefix + str(job_id)
    token = uuid.uuid4().hex
    ttl_ms = int(seconds * 1000)
    try:
        await redis.set(key, token, px=ttl_ms)
    except Exception as exc:  # Redis just went away: arq's own lock stays in place
        log.warning("could not take the lease of job %s: %s", job_id, type(exc).__name__)
        return
    ctx["_lease_task"] = asyncio.create_task(_renew(ctx, redis, key, token, ttl_ms, seconds / 3))


async def _renew(
    ctx: dict[str, Any], redis: Any, key: str, token: str, ttl_ms: int, every: float
) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            held = await redis.eval(_RENEW, 1, key, token, ttl_ms)
        except Exception as exc:  # keep trying: the lease may still be ours
            log.warning("could not renew the lease of %s: %s", key, type(exc).__name__)
            continue
        if held == 0:
            log.warning("lease of %s taken over by another worker; this run stops", key)
            ctx["lease_lost"] = True
            return


async def end_lease(ctx: dict[str, Any]) -> None:
    """arq `on_job_end`: stop renewing (arq then deletes the key as it finishes the job)."""
    task = ctx.pop("_lease_task", None)
    if task is not None:
        task.cancel()
        # bounded: on Python 3.11 a cancel racing a redis-py timeout can be swallowed
        await asyncio.wait({task}, timeout=1)

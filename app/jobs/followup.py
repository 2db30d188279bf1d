"""Work a job hands on to the moment it has fully ended (arq `after_job_end`).

While a job runs, arq keeps its key, so an enqueue under the same id (one job per
session) is dropped: work that arrives after the job's last look would wait for the cron
pass. A job registers `after_job(ctx, fn)`; the worker runs `fn` once the job's key is
gone, when an enqueue succeeds again. Whoever asks for work records the ask before
enqueueing, and `fn` reads it after the key is gone, so no ask falls between the two.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("loom.jobs.followup")

_KEY = "after_job"


def after_job(ctx: dict[str, Any], fn: Callable[[], Awaitable[Any]]) -> None:
    ctx.setdefault(_KEY, []).append(fn)


async def run_after_job(ctx: dict[str, Any]) -> None:
    """arq `after_job_end`: run what the job registered; never raises."""
    for fn in ctx.pop(_KEY, []):
        try:
            await fn()
        except Exception as exc:
            log.warning("a job's follow-up failed: %s", type(exc).__name__)

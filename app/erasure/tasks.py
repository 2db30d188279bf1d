"""Erasure in the worker: the `erase` job (big subjects) and the sweep that resumes an
erasure whose runner died (a killed API or worker). Job arguments name the tenant and the
erasure, never the person (arq keeps them in Redis)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from app.core.queue import enqueue
from app.erasure import repository as repo
from app.erasure import runner
from app.erasure.service import ERASE_JOB, erase_job_id
from app.state import worker_state

log = logging.getLogger("loom.erasure")


async def erase(ctx: dict[str, Any], tenant_id: str, erasure_id: str) -> str:
    state = worker_state(ctx)
    deps = runner.deps_from(
        state.settings, runner.pool_transaction(state.db_connection), state.redis
    )
    row = await runner.run(deps, uuid.UUID(tenant_id), uuid.UUID(erasure_id))
    return "missing" if row is None else row.status


async def resume_erasures(ctx: dict[str, Any]) -> int:
    """Queue the `erase` job of every running erasure nobody advanced for
    LOOM_ERASURE_RECOVERY_SECONDS (the job id dedupes it against one still queued)."""
    state = worker_state(ctx)
    async with state.db_connection() as conn:
        found = await repo.stalled(conn, float(state.settings.erasure_recovery_seconds))
    for tenant_id, erasure_id in found:
        log.info("resuming erasure %s", erasure_id)
        await enqueue(
            state.queue,
            ERASE_JOB,
            str(tenant_id),
            str(erasure_id),
            _job_id=erase_job_id(erasure_id),
        )
    return len(found)

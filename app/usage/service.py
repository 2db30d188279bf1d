"""The budget as the API shows it, and the fact extractions that waited for it."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg

from app.core.config import Settings
from app.core.queue import Queue
from app.llm.usage import day_start, meter_of, next_day
from app.state import worker_state
from app.usage import repository as repo
from app.usage.schemas import BudgetPublic

log = logging.getLogger("loom.usage")

EXTRACT_JOB = "extract_facts"  # app.facts.trigger.EXTRACT_JOB (facts sit above usage)
RESUME_BATCH = 100


async def budget_of(
    conn: asyncpg.Connection, settings: Settings, tenant_id: uuid.UUID
) -> BudgetPublic:
    """The tenant's budget in force and today's spending."""
    now = datetime.now(UTC)
    own = await repo.get_budget(conn, tenant_id)
    if own is not None:
        daily, source = own.daily_tokens, "tenant" if own.daily_tokens is not None else "none"
    else:
        daily = settings.daily_token_budget
        source = "default" if daily is not None else "none"
    used = await repo.used_since(conn, tenant_id, day_start(now))
    return BudgetPublic(
        tenant_id=tenant_id,
        daily_tokens=daily,
        source=source,  # type: ignore[arg-type]
        used_today=used,
        spent=daily is not None and used >= daily,
        resets_at=next_day(now),
    )


async def resume_waiting(queue: Queue, conn: asyncpg.Connection, tenant_id: uuid.UUID) -> int:
    """Queue the tenant's fact extractions that wait for the budget; how many."""
    sessions = await repo.waiting_extractions(conn, tenant_id)
    queued = 0
    for sid in sessions:
        # now, even if a run was scheduled for later (the trigger's quiet time)
        job_id = f"facts:{sid}"
        if await queue.schedule(EXTRACT_JOB, str(tenant_id), str(sid), _job_id=job_id, _defer_by=0):
            queued += 1
    if queued:
        log.info("tenant %s: %d fact extractions resumed (budget)", tenant_id, queued)
    return queued


async def resume_budget_waits(ctx: dict[str, Any]) -> dict[str, int]:
    """arq cron: extractions that waited for a tenant's budget go on once it has room (a
    new UTC day, or a budget raised while no API process could queue them)."""
    state = worker_state(ctx)
    async with state.db_connection() as conn:
        tenants = await repo.tenants_waiting(conn, RESUME_BATCH)
        meter = meter_of(state.llm)
        resumed = 0
        for tenant in tenants:
            if meter is not None:
                meter.forget(tenant)
                if await meter.spent(tenant):
                    continue
            resumed += await resume_waiting(state.queue, conn, tenant)
    return {"tenants": len(tenants), "resumed": resumed}

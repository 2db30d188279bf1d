"""Enqueue compression after an append commits, when the append made the session busy.

`compression_trigger(state)` is the after-append hook (assembled in `app.wiring`). The check
costs one query inside the append's transaction; the enqueue itself runs after commit
(`after_commit`) and never fails the request: with Redis down the job is recorded as
pending and the worker's cron pass enqueues it when Redis is back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.caller import Caller
from app.core.db import after_commit
from app.jobs import repository, triggers
from app.jobs.service import enqueue_compression
from app.messages.service import AfterAppend, AppendedBatch

if TYPE_CHECKING:
    from app.state import AppState

log = logging.getLogger("loom.jobs")


def compression_trigger(state: AppState) -> AfterAppend:
    """The after-append hook that schedules a compression job when it is due."""

    async def enqueue_compression_when_busy(db: AsyncSession, caller: Caller,
                                            batch: AppendedBatch) -> None:
        row = await repository.pressure(db, batch.tenant_id, batch.session_id)
        if row is None or row["job_status"] in triggers.JOB_COVERS:
            return
        trigger = triggers.append_trigger(
            triggers.pressure_from_row(row),
            added_tokens=sum(m.token_count for m in batch.messages),
            added_messages=len(batch.messages),
            new_user_turn=any(m.role == "user" for m in batch.messages),
            busy_usage=state.settings.compress_busy_usage)
        if trigger is None:
            return
        tenant_id, session_id = batch.tenant_id, batch.session_id

        async def _enqueue() -> None:
            await enqueue_compression(state.queue, state.sessionmaker, tenant_id, session_id,
                                      trigger=trigger)

        after_commit(db, _enqueue)

    return enqueue_compression_when_busy

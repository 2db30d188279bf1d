"""Enqueue compression after an append commits, when the append made the session busy.

`compression_trigger(state)` is the append's pressure hook (assembled in `app.wiring`). The
check costs nothing more than the append itself: its statement returns the pressure row
(stored counters and the job status). A job is enqueued only when the append crosses a line
and no queued job covers it; the enqueue runs after commit, after the response of
`POST .../messages` (see `app.messages.service.append`), and never fails the request: with
Redis down the job is recorded as pending and the worker's cron pass enqueues it when Redis
is back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from app.jobs import triggers
from app.jobs.service import enqueue_compression, pool_recorder
from app.messages.service import AppendedBatch, OnPressure

if TYPE_CHECKING:
    from app.state import AppState

def compression_trigger(state: AppState) -> OnPressure:
    """The append's pressure hook: the enqueue of a compression job when one is due (its
    row written in one statement on the hot paths' pool, no ORM transaction)."""
    record = pool_recorder(state.connection)

    def enqueue_compression_when_busy(batch: AppendedBatch, row: Mapping[str, Any]
                                      ) -> Callable[[], Awaitable[None]] | None:
        if row["job_status"] in triggers.JOB_COVERS:
            return None
        trigger = triggers.append_trigger(
            triggers.pressure_from_row(row),
            added_tokens=sum(m.token_count for m in batch.messages),
            added_messages=len(batch.messages),
            new_user_turn=any(m.role == "user" for m in batch.messages),
            busy_usage=state.settings.compress_busy_usage)
        if trigger is None:
            return None
        tenant_id, session_id = batch.tenant_id, batch.session_id

        async def _enqueue() -> None:
            await enqueue_compression(state.queue, None, tenant_id, session_id,
                                      trigger=trigger, record=record)

        return _enqueue

    return enqueue_compression_when_busy

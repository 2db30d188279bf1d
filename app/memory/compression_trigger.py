"""Enqueue compression after an append commits, when the append made the session busy.

`compression_trigger(queue, busy_usage, record)` is the append's pressure hook (assembled
in `app.wiring`). The check costs nothing more than the append itself: its statement
returns the pressure row (stored counters and the job status). A job is enqueued only when
the append crosses a line and no queued job covers it; the enqueue runs after commit, after
the response of `POST .../messages` (see `app.messages.service.append`), and never fails
the request: with Redis down the job is recorded as pending and the worker's cron pass
enqueues it when Redis is back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from app.core.queue import Queue
from app.jobs.service import Recorder, enqueue_compression
from app.memory import pressure as triggers
from app.messages.hooks import AppendedBatch, OnPressure


def compression_trigger(queue: Queue, busy_usage: float, record: Recorder) -> OnPressure:
    """The append's pressure hook: the enqueue of a compression job when one is due (its
    row written by `record`, one statement on the hot paths' pool, no ORM transaction;
    `busy_usage`: `LOOM_COMPRESS_BUSY_USAGE`)."""

    def enqueue_compression_when_busy(
        batch: AppendedBatch, row: Mapping[str, Any]
    ) -> Callable[[], Awaitable[None]] | None:
        if row["job_status"] in triggers.JOB_COVERS:
            return None
        trigger = triggers.append_trigger(
            triggers.pressure_from_row(row),
            added_tokens=sum(m.token_count for m in batch.messages),
            added_messages=len(batch.messages),
            new_user_turn=any(m.role == "user" for m in batch.messages),
            busy_usage=busy_usage,
        )
        if trigger is None:
            return None
        tenant_id, session_id = batch.tenant_id, batch.session_id

        async def _enqueue() -> None:
            await enqueue_compression(
                queue, None, tenant_id, session_id, trigger=trigger, record=record
            )

        return _enqueue

    return enqueue_compression_when_busy

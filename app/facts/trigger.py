"""When a session's facts are extracted: extraction follows the conversation, not
compression.

After each append to a session with facts on, its extraction job (`facts:<session>`, one
per session) is scheduled: at once when `N` messages are waiting (`config.facts.min_batch`,
else `LOOM_FACTS_EVERY_MESSAGES`, 6), else `T` seconds later (`LOOM_FACTS_QUIET_SECONDS`,
60) once `LOOM_FACTS_QUIET_MIN_USER` (3) user messages wait, else after the idle time
(`LOOM_FACTS_IDLE_SECONDS`, 900), and every later append moves that time again
(a debounce). A run reads what waited when it started; messages that arrive meanwhile are
read by it only while `N` of them wait, else by the next run. A
flush (`POST .../memory/extract`, or a session that ends) runs it at once. A job that ran
while messages arrived schedules itself again when it ends (`after_extraction`), so the
last messages of a conversation are never left for a later one.

`extraction_due` is the rule, with no I/O.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from app.facts import state as runs
from app.facts.policy import FactsConfig
from app.facts.run import connected

if TYPE_CHECKING:
    from app.core.config import Settings
    from app.core.db import Connect
    from app.core.queue import Queue
    from app.messages.hooks import AppendedBatch

log = logging.getLogger("loom.facts.trigger")

EXTRACT_JOB = "extract_facts"


def extract_job_id(session_id: uuid.UUID | str) -> str:
    return f"facts:{session_id}"


def extraction_due(
    waiting: int,
    every: int,
    quiet_seconds: float,
    *,
    users_waiting: int | None = None,
    quiet_min_user: int = 1,
    idle_seconds: float | None = None,
) -> float | None:
    """Seconds until the extraction should run: 0 once `every` messages wait; the quiet
    time once `quiet_min_user` user messages wait; else the idle time (turns
    further apart than the quiet time cost a run of two messages each, 592 calls per
    1,000 messages); None when nothing waits."""
    if waiting <= 0:
        return None
    if waiting >= every:
        return 0.0
    if idle_seconds is None or users_waiting is None or users_waiting >= quiet_min_user:
        return float(quiet_seconds)
    return max(float(quiet_seconds), float(idle_seconds))


async def schedule_extraction(
    queue: Queue,
    connect: Connect,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    delay: float,
) -> bool:
    """Record the job as pending, then schedule it `delay` seconds from now. Never raises."""
    job_id = extract_job_id(session_id)
    try:
        async with connected(connect, commit=True) as conn:
            await runs.mark_pending(conn, tenant_id, session_id, job_id)
    except Exception as exc:
        log.warning("could not record pending extraction of %s: %s", session_id, type(exc).__name__)
    return await queue.schedule(
        EXTRACT_JOB, str(tenant_id), str(session_id), _job_id=job_id, _defer_by=delay
    )


async def follow(
    queue: Queue,
    connect: Connect,
    settings: Settings,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    last_seq: int | None = None,
    config: Mapping[str, Any] | None = None,
) -> bool:
    """Schedule the session's extraction as its waiting messages say (module doc)."""
    async with connected(connect, commit=False) as conn:
        if last_seq is None or config is None:
            info = await runs.session_facts(conn, tenant_id, session_id)
            if info is None:
                return False
            last_seq, config = info.last_seq, info.config
        watermark, retrying, users = await runs.waiting_state(conn, tenant_id, session_id)
    cfg = FactsConfig.from_stored((config or {}).get("facts"))
    if not cfg.enabled:
        return False
    delay = extraction_due(
        last_seq - watermark,
        cfg.every(settings.facts_every_messages),
        settings.facts_quiet_seconds,
        users_waiting=users,
        quiet_min_user=settings.facts_quiet_min_user,
        idle_seconds=settings.facts_idle_seconds,
    )
    if delay is None or (retrying and delay > 0):
        # a retry waiting for its backoff reads these messages too: moving it to the quiet
        # time would postpone it (each retry came ~60 s later)
        return False
    return await schedule_extraction(queue, connect, tenant_id, session_id, delay=delay)


def extraction_trigger(
    queue: Queue, connect: Connect, settings: Settings
) -> Callable[[AppendedBatch, Mapping[str, Any]], Callable[[], Awaitable[None]] | None]:
    """The append's hook (with compression's, see `app.wiring`): sessions with facts on
    schedule their extraction after commit."""

    def schedule_when_facts_on(
        batch: AppendedBatch, row: Mapping[str, Any]
    ) -> Callable[[], Awaitable[None]] | None:
        config = row["config"] or {}
        if not FactsConfig.from_stored(config.get("facts")).enabled:
            return None
        last_seq = int(row["last_seq"])

        async def _schedule() -> None:
            await follow(
                queue,
                connect,
                settings,
                batch.tenant_id,
                batch.session_id,
                last_seq=last_seq,
                config=config,
            )

        return _schedule

    return schedule_when_facts_on


def flush_on_end(queue: Queue, connect: Connect) -> Callable[[Any], Awaitable[None]]:
    """The session-ended hook (`app.wiring`): a session that ends extracts now when its
    facts are on."""

    async def flush_ended(session: Any) -> None:
        await flush_if_on(queue, connect, session)

    return flush_ended


async def flush_if_on(queue: Queue, connect: Connect, session: Any) -> bool:
    """A session that ends: extract now when its facts are on."""
    if not FactsConfig.from_stored((session.config or {}).get("facts")).enabled:
        return False
    return await flush(queue, connect, session.tenant_id, session.id)


async def flush(
    queue: Queue,
    connect: Connect,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
) -> bool:
    """Extract now (an explicit call, or a session that ends)."""
    return await schedule_extraction(queue, connect, tenant_id, session_id, delay=0.0)

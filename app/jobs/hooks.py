"""Enqueue compression after an append commits, when the append made the session busy.

Registered at import (imported from `app/api.py`). The check costs one query inside the
append's transaction; the enqueue itself runs after commit (`after_commit`) and never fails
the request: with Redis down the job is recorded as pending and the worker's cron pass
enqueues it when Redis is back.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.caller import Caller
from app.core.db import after_commit
from app.core.lifecycle import on_shutdown, on_startup
from app.jobs import repository, triggers
from app.jobs.service import enqueue_compression
from app.messages.service import AppendedBatch, on_after_append

log = logging.getLogger("loom.jobs")

# The running apps (queue, sessionmaker, settings), registered by their lifespans: append
# hooks receive only the DB session and the caller. Several apps may live in one process
# (tests, embedded serve); the one whose engine the session uses is the one appending.
_apps: list[Any] = []


@on_startup
async def _remember_app(app: Any) -> None:
    _apps.append(app)


@on_shutdown
async def _forget_app(app: Any) -> None:
    if app in _apps:
        _apps.remove(app)


def _app_for(db: AsyncSession) -> Any:
    for app in reversed(_apps):
        if getattr(app.state, "engine", None) is db.bind:
            return app
    return _apps[-1] if _apps else None


@on_after_append
async def enqueue_compression_when_busy(db: AsyncSession, caller: Caller,
                                        batch: AppendedBatch) -> None:
    """Schedule a compression job (after commit) if this append made the session busy."""
    app = _app_for(db)
    if app is None:
        return
    row = await repository.pressure(db, batch.tenant_id, batch.session_id)
    if row is None:
        return
    trigger = triggers.append_trigger(
        triggers.pressure_from_row(row),
        added_tokens=sum(m.token_count for m in batch.messages),
        added_messages=len(batch.messages),
        new_user_turn=any(m.role == "user" for m in batch.messages),
        busy_usage=app.state.settings.compress_busy_usage)
    if trigger is None:
        return
    tenant_id, session_id = batch.tenant_id, batch.session_id

    async def _enqueue() -> None:
        await enqueue_compression(app, app.state.sessionmaker, tenant_id, session_id,
                                  trigger=trigger)

    after_commit(db, _enqueue)

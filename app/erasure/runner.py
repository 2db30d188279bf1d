"""The erasure runner: deletes what a tombstoned erasure holds, in batches, resumable.

The same code runs in the request (small subjects), in the worker's `erase` job (big ones)
and in the worker's sweep (an erasure whose runner died). Every step is idempotent and
commits its count with its deletion; two runners of one erasure at once only split the
work between them (each counts what it deleted).

Order, per session: messages (in seq batches); then in one statement its references,
shared-memory scope, summaries, snapshots, memory state, search statistics, idempotency
records, job rows, facts drawn from it and their versions; its queued Redis jobs; and then
the session row itself (its cascade takes whatever a racing writer slipped in meanwhile). Then the
subject's own tier (a user's facts; an agent's tier and namespace), the cache purge every
API process hears (`app.erasure.caches`), and the completion that forgets the raw id.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import pg
from app.core.config import Settings
from app.core.db import transaction
from app.erasure import caches, policy
from app.erasure import repository as repo
from app.facts.support import release_session

log = logging.getLogger("loom.erasure")

MIN_BATCH = 500


def _timed_out(exc: BaseException) -> bool:
    """The statement timeout cancelled it (asyncpg's QueryCanceledError, maybe wrapped)."""
    import asyncpg

    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, asyncpg.exceptions.QueryCanceledError):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


@dataclass(frozen=True, slots=True)
class Deps:
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: Redis | None  # None: no Redis (queued jobs then go when they find their session gone)
    queue_name: str
    batch: int
    pause_seconds: float = 0.0


def deps_from(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], redis: Redis | None
) -> Deps:
    return Deps(
        sessionmaker,
        redis,
        settings.queue_name,
        int(settings.erasure_batch),
        float(settings.erasure_pause_seconds),
    )


async def _step(
    deps: Deps, t: uuid.UUID, e: uuid.UUID, kind: str, sql: str, params: dict[str, Any]
) -> int:
    async with transaction(deps.sessionmaker) as db:
        return await repo.counted(db, t, e, kind, sql, params)


async def _drop_jobs(deps: Deps, t: uuid.UUID, e: uuid.UUID, session_id: uuid.UUID) -> None:
    """The session's queued jobs (their arguments name the session) leave Redis."""
    if deps.redis is None:
        return
    ids = policy.job_ids(session_id)
    try:
        pipe = deps.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.zrem(deps.queue_name, job_id)
        for job_id in ids:
            pipe.delete(*(prefix + job_id for prefix in policy.ARQ_KEY_PREFIXES))
        found = await pipe.execute()
    except Exception as exc:  # Redis down: the jobs find their session gone and stop
        log.warning("erasure %s: queued jobs not removed: %s", e, type(exc).__name__)
        return
    queued = sum(1 for n in found[: len(ids)] if n)
    if queued:
        async with transaction(deps.sessionmaker) as db:
            await repo.add_count(db, t, e, "queued_jobs", queued)


async def erase_session(
    deps: Deps, t: uuid.UUID, e: uuid.UUID, session_id: uuid.UUID, lo: int, hi: int
) -> None:
    params = {"s": session_id, "sc": str(session_id)}
    batch = deps.batch
    while lo < hi:
        top = min(hi, lo + batch)
        try:
            await _step(deps, t, e, *repo.MESSAGES_BATCH, {**params, "lo": lo, "hi": top})
        except Exception as exc:
            # a batch the statement timeout cut (a busy database): smaller ones go through
            if batch <= MIN_BATCH or not _timed_out(exc):
                raise
            batch = max(MIN_BATCH, batch // 2)
            log.info("erasure %s: batch of %d messages timed out; now %d", e, top - lo, batch)
            continue
        lo = top
        if deps.pause_seconds:
            await asyncio.sleep(deps.pause_seconds)
    async with transaction(deps.sessionmaker) as db:
        # facts other sessions support stay, without this one
        await release_session(await pg.driver_connection(db), t, session_id)
        await repo.run_combined(db, t, e, repo.SESSION_REST, params)
    await _drop_jobs(deps, t, e, session_id)
    await _step(deps, t, e, *repo.SESSION_ROW, params)
    await caches.publish(deps.redis, caches.purge_event(t, sessions=[session_id]))


async def run(deps: Deps, tenant_id: uuid.UUID, erasure_id: uuid.UUID) -> repo.ErasureRow | None:
    """Carry the erasure to its end (or return None when there is no such erasure)."""
    async with deps.sessionmaker() as db:
        row = await repo.get(db, tenant_id, erasure_id)
    if row is None or row.status != "running":
        return row
    while True:
        async with deps.sessionmaker() as db:
            nxt = await repo.next_session(db, tenant_id, erasure_id)
        if nxt is None:
            break
        await erase_session(deps, tenant_id, erasure_id, *nxt)
    if row.kind in ("user", "agent") and row.subject is not None:
        params = {"k": row.kind, "sub": row.subject}
        deletes = repo.TIER_DELETES + (repo.AGENT_NAMESPACE_DELETES if row.kind == "agent" else ())
        for kind, sql in deletes:
            await _step(deps, tenant_id, erasure_id, kind, sql, params)
        if row.kind == "agent":
            await caches.publish(deps.redis, caches.purge_event(tenant_id, agents=[row.subject]))
    async with transaction(deps.sessionmaker) as db:
        await repo.complete(db, tenant_id, erasure_id)
    async with deps.sessionmaker() as db:
        done = await repo.get(db, tenant_id, erasure_id)
    log.info("erasure %s completed", erasure_id)
    return done

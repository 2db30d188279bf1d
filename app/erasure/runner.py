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
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any

import asyncpg
from redis.asyncio import Redis

from app.core.config import Settings
from app.core.db import Connect, transaction
from app.erasure import caches, policy
from app.erasure import repository as repo
from app.facts.support import release_session
from app.facts.trigger import extract_job_id
from app.jobs.service import compress_job_id

log = logging.getLogger("loom.erasure")

MIN_BATCH = 500

# The jobs a session can have queued, by their owners' job ids (`app.jobs.service`,
# `app.facts.trigger`): a new kind of per-session job is added here.
SESSION_JOBS: tuple[Callable[[uuid.UUID], str], ...] = (compress_job_id, extract_job_id)

# A connection in a transaction of its own: committed when the block ends, rolled back
# when it raises.
Begin = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


def pool_transaction(connect: Connect) -> Begin:
    """Transactions on connections of `connect`'s pool (`AppState.db_connection`, the
    worker's `WorkerState.db_connection`)."""
    return partial(transaction, connect)


def _timed_out(exc: BaseException) -> bool:
    """The statement timeout cancelled it (asyncpg's QueryCanceledError, maybe wrapped)."""
    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, asyncpg.exceptions.QueryCanceledError):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


@dataclass(frozen=True, slots=True)
class Deps:
    begin: Begin
    redis: Redis | None  # None: no Redis (queued jobs then go when they find their session gone)
    queue_name: str
    batch: int
    pause_seconds: float = 0.0
    session_jobs: Sequence[Callable[[uuid.UUID], str]] = SESSION_JOBS


def deps_from(
    settings: Settings,
    begin: Begin,
    redis: Redis | None,
) -> Deps:
    """The runner's parts; `begin`: the pool's transactions (an API process,
    `pool_transaction`) or the engine's (the worker, `engine_transaction`)."""
    return Deps(
        begin,
        redis,
        settings.queue_name,
        int(settings.erasure_batch),
        float(settings.erasure_pause_seconds),
    )


async def _step(
    deps: Deps, t: uuid.UUID, e: uuid.UUID, kind: str, sql: str, params: dict[str, Any]
) -> int:
    async with deps.begin() as conn:
        return await repo.counted(conn, t, e, kind, sql, params)


async def _drop_jobs(deps: Deps, t: uuid.UUID, e: uuid.UUID, session_id: uuid.UUID) -> None:
    """The session's queued jobs (their arguments name the session) leave Redis."""
    if deps.redis is None:
        return
    ids = policy.job_ids(session_id, deps.session_jobs)
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
        async with deps.begin() as conn:
            await repo.add_count(conn, t, e, "queued_jobs", queued)


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
    async with deps.begin() as conn:
        # facts other sessions support stay, without this one
        await release_session(conn, t, session_id)
        await repo.run_combined(conn, t, e, repo.SESSION_REST, params)
    await _drop_jobs(deps, t, e, session_id)
    await _step(deps, t, e, *repo.SESSION_ROW, params)
    await caches.publish(deps.redis, caches.purge_event(t, sessions=[session_id]))


async def run(deps: Deps, tenant_id: uuid.UUID, erasure_id: uuid.UUID) -> repo.ErasureRow | None:
    """Carry the erasure to its end (or return None when there is no such erasure)."""
    async with deps.begin() as conn:
        row = await repo.get(conn, tenant_id, erasure_id)
    if row is None or row.status != "running":
        return row
    while True:
        async with deps.begin() as conn:
            nxt = await repo.next_session(conn, tenant_id, erasure_id)
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
    async with deps.begin() as conn:
        await repo.complete(conn, tenant_id, erasure_id)
        done = await repo.get(conn, tenant_id, erasure_id)
    log.info("erasure %s completed", erasure_id)
    return done

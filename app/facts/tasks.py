"""The fact extraction job (arq) and its enqueue, with compression's guarantees.

`extract_facts(ctx, tenant_id, session_id, force=False)`, job id `facts:{session}` (one per
session queued or running; `keep_result=0` so a finished job never blocks the next), runs
`app.facts.extract.run_extraction` under the worker's lease (app/jobs/lease.py):
a killed worker's job runs again within `LOOM_JOB_RECOVERY_SECONDS`, and the watermark
check makes a batch apply at most once.

Failures: an LLM error or a model answer that cannot be applied writes nothing of its
batch and is retried with exponential backoff (`Retry(defer=...)`) up to
`LOOM_FACTS_MAX_TRIES`; after the last try the job is `failed` with the reason in
`last_error` (GET /v1/sessions/{id}/memory/extract). No LLM configured: `skipped` /
`no_llm`, nothing extracted and the watermark kept (the messages are read once an LLM is
configured).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from arq import Retry
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.queue import enqueue
from app.facts import metrics
from app.facts import repository as repo
from app.facts.extract import Deps, LeaseLost, Outcome, run_extraction
from app.facts.policy import FactsConfig
from app.jobs.lease import lease_lost
from app.models.base import table_of
from app.models.fact import FactExtraction

log = logging.getLogger("loom.facts.jobs")

EXTRACT_JOB = "extract_facts"
MAX_BACKOFF_SECONDS = 300.0


def extract_job_id(session_id: uuid.UUID | str) -> str:
    return f"facts:{session_id}"


def backoff_seconds(base: float, job_try: int) -> float:
    return min(MAX_BACKOFF_SECONDS, base * (2 ** max(0, job_try - 1)))


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


async def record(sessionmaker: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID,
                 session_id: uuid.UUID, **values: Any) -> None:
    """Write job status; bookkeeping never decides the job's fate."""
    try:
        async with sessionmaker() as db:
            await repo.mark(db, tenant_id, session_id, **values)
            await db.commit()
    except Exception as exc:
        log.warning("could not record fact extraction status: %s", type(exc).__name__)


async def _usage(sessionmaker: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID,
                 session_id: uuid.UUID, outcome: Outcome) -> None:
    if not outcome.llm_calls:
        return
    try:
        async with sessionmaker() as db:
            await repo.add_usage(db, tenant_id, session_id, calls=outcome.llm_calls,
                                 input_tokens=outcome.input_tokens,
                                 output_tokens=outcome.output_tokens)
            await db.commit()
    except Exception as exc:
        log.warning("could not record fact extraction usage: %s", type(exc).__name__)


def _finished(outcome: Outcome) -> dict[str, Any]:
    return {"status": "skipped" if outcome.skipped and not outcome.batches else "succeeded",
            "skipped": outcome.skipped, "last_error": None, "last_result": outcome.as_dict(),
            "finished_at": _now(), "runs": _runs_plus_one()}


def _now() -> Any:
    return sa.func.now()


def _runs_plus_one() -> Any:
    return table_of(FactExtraction).c.runs + 1


async def run_once(deps: Deps, tenant_id: uuid.UUID, session_id: uuid.UUID, *, force: bool,
                   ctx: dict[str, Any] | None = None) -> Outcome:
    """One try: skipped without an LLM, else extraction (raises on failure; usage is
    recorded either way)."""
    if deps.llm is None:
        metrics.JOBS_SKIPPED.labels(reason="no_llm").inc()
        return Outcome(skipped="no_llm")
    outcome = Outcome()
    try:
        outcome = await run_extraction(deps, tenant_id, session_id, force=force,
                                       lease_lost=lambda: lease_lost(ctx or {}),
                                       outcome=outcome)
    finally:
        await _usage(deps.sessionmaker, tenant_id, session_id, outcome)
    if outcome.skipped:
        metrics.JOBS_SKIPPED.labels(reason=outcome.skipped).inc()
    return outcome


async def extract_facts(ctx: dict[str, Any], tenant_id: str, session_id: str,
                        force: bool = False) -> dict[str, Any]:
    """arq job: extract durable facts from a session's new messages (module doc)."""
    settings = ctx["settings"]
    tid, sid = uuid.UUID(str(tenant_id)), uuid.UUID(str(session_id))
    job_try = int(ctx.get("job_try") or 1)
    deps = Deps(ctx["sessionmaker"], ctx.get("llm"), settings)
    await record(deps.sessionmaker, tid, sid, status="running", attempts=job_try,
                 job_id=str(ctx.get("job_id") or extract_job_id(sid)), started_at=_now(),
                 finished_at=None)
    try:
        async with asyncio.timeout(settings.facts_job_timeout_seconds):
            outcome = await run_once(deps, tid, sid, force=force, ctx=ctx)
    except LeaseLost:
        log.warning("fact extraction of %s handed over to another worker", sid)
        return {"lease_lost": True}
    except Exception as exc:
        error = _error_text(exc)
        if type(exc).__name__ == "FactOutputError":
            metrics.BAD_OUTPUT.inc()
        log.warning("fact extraction of %s failed (try %d/%d): %s", sid, job_try,
                    settings.facts_max_tries, error)
        if job_try >= settings.facts_max_tries:
            await record(deps.sessionmaker, tid, sid, status="failed", last_error=error,
                         finished_at=_now(), runs=_runs_plus_one())
            metrics.JOBS_RUN.labels(outcome="failed").inc()
            return {"failed": error}
        await record(deps.sessionmaker, tid, sid, status="pending", last_error=error)
        metrics.JOBS_RETRIED.inc()
        raise Retry(defer=backoff_seconds(settings.facts_retry_base_seconds, job_try)) \
            from None
    await record(deps.sessionmaker, tid, sid, **_finished(outcome))
    metrics.JOBS_RUN.labels(outcome="skipped" if outcome.skipped and not outcome.batches
                            else "succeeded").inc()
    return outcome.as_dict()


async def enqueue_extraction(holder: Any, sessionmaker: async_sessionmaker[AsyncSession],
                             tenant_id: uuid.UUID, session_id: uuid.UUID, *,
                             force: bool) -> bool:
    """Record the job as pending, then hand it to the queue. Never raises."""
    job_id = extract_job_id(session_id)
    try:
        async with sessionmaker() as db:
            await repo.mark_pending(db, tenant_id, session_id, job_id)
            await db.commit()
    except Exception as exc:
        log.warning("could not record pending extraction of %s: %s", session_id,
                    type(exc).__name__)
    return await enqueue(holder, EXTRACT_JOB, str(tenant_id), str(session_id), force,
                         _job_id=job_id)


async def after_compression(ctx: dict[str, Any], tenant_id: uuid.UUID,
                            session_id: uuid.UUID) -> None:
    """A compression moved messages out of L1: extract facts from them when the session
    has facts on (the job itself waits for `min_batch` new messages). Never raises."""
    try:
        async with ctx["sessionmaker"]() as db:
            info = await repo.session_facts(db, tenant_id, session_id)
            await db.rollback()
        if info is None or not FactsConfig.from_stored(info.config.get("facts")).enabled:
            return
        await enqueue_extraction(ctx, ctx["sessionmaker"], tenant_id, session_id,
                                 force=False)
    except Exception as exc:
        log.warning("could not enqueue fact extraction of %s: %s", session_id,
                    type(exc).__name__)


async def recover_fact_extractions(ctx: dict[str, Any]) -> dict[str, int]:
    """arq cron (with the compression pass's period): enqueue extractions left `pending`
    (their enqueue was lost while Redis was down) or `running` far past their timeout
    (worker and job lost). They run as after a compression (messages that left L1)."""
    settings = ctx["settings"]
    now = datetime.now(UTC)
    interval = timedelta(seconds=settings.compress_cron_seconds)
    async with ctx["sessionmaker"]() as db:
        lost = await repo.stale_extractions(
            db, pending_before=now - 2 * interval,
            running_before=now - timedelta(seconds=2 * settings.facts_job_timeout_seconds + 60),
            limit=settings.compress_cron_batch)
    enqueued = 0
    for tid, sid in lost:
        if await enqueue_extraction(ctx, ctx["sessionmaker"], tid, sid, force=False):
            enqueued += 1
    return {"lost": len(lost), "enqueued": enqueued}

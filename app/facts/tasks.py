"""The fact extraction job (arq), with compression's guarantees.

`extract_facts(ctx, tenant_id, session_id, force=False, retry_failed=False)`, job id
`facts:{session}` (one per session queued or running; `keep_result=0` so a finished job
never blocks the next; scheduled by `app.facts.trigger`), runs
`app.facts.extract.run_extraction` under the worker's lease (app/jobs/lease.py): a killed
worker's job runs again within `LOOM_JOB_RECOVERY_SECONDS`, and the watermark check makes
a batch apply at most once. When it ends, messages that arrived meanwhile schedule it again
(`app.jobs.followup`).

Failures: an LLM error or a model answer that cannot be applied writes nothing of its
batch and is retried with exponential backoff (`Retry(defer=...)`) up to
`LOOM_FACTS_MAX_TRIES`. After the last try the batch's range is marked failed
(`failed_ranges`), the watermark moves past it and the job is `failed` with the reason in
`last_error`; later messages are read as usual, and `retry_failed` re-runs the failed
ranges. No LLM configured: `skipped` / `no_llm` with the reason in `last_error`, nothing
extracted and the watermark kept (the messages are read once an LLM is configured).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from arq import Retry

from app.core.config import Settings
from app.core.queue import Queue
from app.facts import metrics
from app.facts import state as runs
from app.facts.extract import Deps, LeaseLost, Outcome, run_extraction, run_range, stated_range
from app.facts.run import connected
from app.facts.trigger import EXTRACT_JOB, extract_job_id, follow, schedule_extraction
from app.jobs.followup import after_job
from app.jobs.lease import lease_lost
from app.llm import usage
from app.state import worker_state

if TYPE_CHECKING:
    from app.core.db import Connect

log = logging.getLogger("loom.facts.jobs")

__all__ = ["EXTRACT_JOB", "extract_facts", "extract_job_id", "recover_fact_extractions"]

MAX_BACKOFF_SECONDS = 300.0
NO_LLM = (
    "no LLM configured (set LOOM_LLM_PROVIDER and its API key): facts are not "
    "extracted; the messages are read once one is"
)


def backoff_seconds(base: float, job_try: int) -> float:
    return min(MAX_BACKOFF_SECONDS, base * (2 ** max(0, job_try - 1)))


def set_aside_within(settings: Settings) -> float:
    """Seconds of backoff before a batch failing every try is set aside (the waits between
    its `LOOM_FACTS_MAX_TRIES` tries; the calls themselves come on top)."""
    tries = int(settings.facts_max_tries)
    base = float(settings.facts_retry_base_seconds)
    return sum(backoff_seconds(base, t) for t in range(1, tries))


CLAIM_POLL_SECONDS = 0.1


def claim_stale_after(settings: Settings) -> float:
    """Seconds after which a run's claim no longer holds (its worker died with it)."""
    return float(settings.facts_job_timeout_seconds) + 60.0


async def claimed(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    owner: str,
    *,
    wait: float,
    attempts: int = 1,
) -> bool:
    """Claim the session's extraction for `owner` (`app.facts.state.claim_run`), waiting
    up to `wait` seconds while another run holds it (a flush answered in the
    request and the queued job read the same batch, 2 LLM calls for 0 batches). The run
    that waited then finds the messages read and asks nothing. False past `wait`."""
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        try:
            async with connected(deps.connect, commit=True) as conn:
                ok = await runs.claim_run(
                    conn,
                    tenant_id,
                    session_id,
                    owner,
                    stale_after=claim_stale_after(deps.settings),
                    attempts=attempts,
                )
        except Exception as exc:  # the claim is bookkeeping: never worse than before it
            log.warning("could not claim the fact extraction: %s: %s", type(exc).__name__, exc)
            return True
        if ok:
            return True
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(CLAIM_POLL_SECONDS)


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


async def record(
    connect: Connect,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    **values: Any,
) -> None:
    """Write job status; bookkeeping never decides the job's fate."""
    try:
        async with connected(connect, commit=True) as conn:
            await runs.mark(conn, tenant_id, session_id, **values)
    except Exception as exc:
        log.warning("could not record fact extraction status: %s", type(exc).__name__)


def finished(outcome: Outcome) -> dict[str, Any]:
    """The status of a run that ended well. A run that found nothing to do (another run
    read the messages first) keeps the last result of the run that did."""
    skipped = bool(outcome.skipped and not outcome.batches)
    values: dict[str, Any] = {
        "status": "skipped" if skipped else "succeeded",
        "skipped": outcome.skipped,
        "last_error": NO_LLM if outcome.skipped == "no_llm" else None,
        "finished_at": _now(),
        "runs": _runs_plus_one(),
    }
    if outcome.batches or outcome.skipped:
        values["last_result"] = outcome.as_dict()
    return values


def _now() -> Any:
    return runs.NOW


def _runs_plus_one() -> Any:
    return runs.RUNS_PLUS_ONE


async def run_once(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    retry_failed: bool = False,
    ctx: dict[str, Any] | None = None,
    outcome: Outcome | None = None,
    short_tail: bool = True,
) -> Outcome:
    """One try: skipped without an LLM, else the failed ranges (`retry_failed`) then the
    new messages (raises on failure; usage is recorded call by call)."""
    outcome = outcome if outcome is not None else Outcome()
    if deps.llm is None:
        metrics.JOBS_SKIPPED.labels(reason="no_llm").inc()
        outcome.skipped = "no_llm"
        return outcome
    if await usage.spent(deps.llm, tenant_id, session_id):  # waits for the budget
        outcome.skipped = "budget"
        return outcome
    if retry_failed:
        async with connected(deps.connect, commit=False) as conn:
            state = await runs.get_state(conn, tenant_id, session_id)
            ranges = list(state.failed_ranges or []) if state is not None else []
        for r in ranges:
            await run_range(
                deps, tenant_id, session_id, int(r["first_seq"]), int(r["last_seq"]), outcome
            )
    await run_extraction(
        deps,
        tenant_id,
        session_id,
        lease_lost=lambda: lease_lost(ctx or {}),
        outcome=outcome,
        short_tail=short_tail,
    )
    if outcome.skipped:
        metrics.JOBS_SKIPPED.labels(reason=outcome.skipped).inc()
    return outcome


class _Moved(Exception):
    """The watermark moved off a batch about to be set aside."""


async def give_up_on(
    connect: Connect,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    batch: tuple[int, int],
    error: str,
) -> bool:
    """Mark a batch that failed every try as a failed range and move the watermark past
    it (only if it is still the next batch). True when marked."""
    first, last = batch
    try:
        async with connected(connect, commit=True) as conn:
            await runs.ensure_state(conn, tenant_id, session_id)
            state = await runs.get_state(conn, tenant_id, session_id, for_update=True)
            if state is None or state.watermark_seq != first - 1:
                raise _Moved
            ranges = [
                *(state.failed_ranges or []),
                stated_range(first, last, error, datetime.now(UTC)),
            ]
            await runs.set_failed_ranges(conn, tenant_id, session_id, ranges)
            await runs.advance(conn, tenant_id, session_id, last)
            return True
    except _Moved:  # rolled back: the batch is no longer the next one
        return False
    except Exception as exc:
        log.warning("could not mark a failed fact range: %s", type(exc).__name__)
        return False


async def extract_facts(
    ctx: dict[str, Any],
    tenant_id: str,
    session_id: str,
    force: bool = False,
    retry_failed: bool = False,
) -> dict[str, Any]:
    """arq job: extract durable facts from a session's new messages (module doc). `force`
    is kept for jobs queued by older versions (every run now reads every new message)."""
    state = worker_state(ctx)
    settings = state.settings
    tid, sid = uuid.UUID(str(tenant_id)), uuid.UUID(str(session_id))
    job_try = int(ctx.get("job_try") or 1)
    deps = Deps(state.db_connection, state.llm, settings)
    owner = str(ctx.get("job_id") or extract_job_id(sid))
    if not await claimed(
        deps, tid, sid, owner, wait=settings.facts_wait_seconds, attempts=job_try
    ):  # a flush in a request still runs: its end is followed up
        _follow_up(ctx, tid, sid)
        return {"busy": True}
    outcome = Outcome()
    try:
        async with asyncio.timeout(settings.facts_job_timeout_seconds):
            await run_once(
                deps,
                tid,
                sid,
                retry_failed=retry_failed,
                ctx=ctx,
                outcome=outcome,
                short_tail=False,
            )
    except LeaseLost:
        log.warning("fact extraction of %s handed over to another worker", sid)
        return {"lease_lost": True}
    except Exception as exc:
        error = _error_text(exc)
        if type(exc).__name__ == "FactOutputError":
            metrics.BAD_OUTPUT.inc()
        log.warning(
            "fact extraction of %s failed (try %d/%d): %s",
            sid,
            job_try,
            settings.facts_max_tries,
            error,
        )
        if job_try >= settings.facts_max_tries:
            if (
                outcome.current is not None
                and not retry_failed
                and await give_up_on(deps.connect, tid, sid, outcome.current, error)
            ):
                first, last = outcome.current
                error = (
                    f"msg {first}-{last} set aside after {job_try} tries (retry_failed "
                    f"re-runs it): {error}"
                )[:300]
            await record(
                deps.connect,
                tid,
                sid,
                status="failed",
                last_error=error,
                finished_at=_now(),
                runs=_runs_plus_one(),
            )
            metrics.JOBS_RUN.labels(outcome="failed").inc()
            _follow_up(ctx, tid, sid)
            return {"failed": error}
        # no follow-up here: it would move the retry to the quiet time
        await record(deps.connect, tid, sid, status="pending", last_error=error)
        metrics.JOBS_RETRIED.inc()
        raise Retry(defer=backoff_seconds(settings.facts_retry_base_seconds, job_try)) from None
    await record(deps.connect, tid, sid, **finished(outcome))
    metrics.JOBS_RUN.labels(
        outcome="skipped" if outcome.skipped and not outcome.batches else "succeeded"
    ).inc()
    _follow_up(ctx, tid, sid)
    return outcome.as_dict()


def _follow_up(ctx: dict[str, Any], tid: uuid.UUID, sid: uuid.UUID) -> None:
    """Once the job has ended (not when it waits for a retry), schedule it again for the
    messages that arrived meanwhile."""
    state = worker_state(ctx)
    after_job(ctx, lambda: follow(state.queue, state.db_connection, state.settings, tid, sid))


async def enqueue_extraction(
    queue: Queue,
    connect: Connect,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
) -> bool:
    """Record the job as pending, then run it as soon as a worker takes it. Never raises."""
    return await schedule_extraction(queue, connect, tenant_id, session_id, delay=0.0)


async def recover_fact_extractions(ctx: dict[str, Any]) -> dict[str, int]:
    """arq cron (with the compression pass's period): enqueue extractions left `pending`
    (their enqueue was lost while Redis was down) or `running` far past their timeout
    (worker and job lost)."""
    state = worker_state(ctx)
    settings = state.settings
    now = datetime.now(UTC)
    interval = timedelta(seconds=settings.compress_cron_seconds)
    async with connected(state.db_connection, commit=False) as conn:
        lost = await runs.stale_extractions(
            conn,
            pending_before=now
            - 2 * interval
            - timedelta(seconds=max(settings.facts_quiet_seconds, settings.facts_idle_seconds)),
            running_before=now - timedelta(seconds=2 * settings.facts_job_timeout_seconds + 60),
            limit=settings.compress_cron_batch,
        )
    enqueued = 0
    for tid, sid in lost:
        if await enqueue_extraction(state.queue, state.db_connection, tid, sid):
            enqueued += 1
    return {"lost": len(lost), "enqueued": enqueued}

"""Background compression jobs (arq): summarise with the LLM, never inside a request.

`compress_session(ctx, tenant_id, session_id, force=False)` (job id `compress:{session}`,
so one per session is queued or running):

1. plan with `plan_compression` in a short read transaction;
2. summarise the planned ranges with the LLM *outside* any transaction (no row lock is
   held while the LLM thinks);
3. apply with `apply_compression`, which re-checks the state version under the row lock:
   `StaleMemoryState` means the memory moved meanwhile, so we re-plan. At most
   `RANGES_PER_APPLY` ranges are applied per transaction, so a long backlog makes durable
   progress and a crash loses at most one batch of LLM work;
4. loop until nothing is due (appends that arrived while the job ran are covered too).

Failures: a retryable LLM failure (timeout, 5xx, 529 overload, 429) reschedules the job
with exponential backoff (`Retry(defer=...)`) for its first `LOOM_COMPRESS_LLM_TRIES - 1`
tries; after that the heuristic summary is written (`method: heuristic`). Non-retryable
LLM errors (bad key, empty or malformed answer) fall back at once. Any other error
(database, Redis...) is retried with backoff up to `LOOM_COMPRESS_MAX_TRIES`, then the job
is marked failed with its last error. A worker killed mid-job has written nothing of the
unfinished batch (the transaction never committed); another worker runs the job again
once its lease expires (within `LOOM_JOB_RECOVERY_SECONDS`, app/jobs/lease.py), and the
unique `(session_id, start_seq)` summary key plus the version check make a second summary
of the same range impossible.

A compression asked for while a job runs (or ends) is recorded on the job row before the
enqueue that arq drops (the job id is taken); once the job has fully ended, the worker
enqueues it again (`requeue_if_asked`, via `app.jobs.followup`), so a due compression
never waits for the cron pass.

`compress_busy_sessions(ctx)` is the cron pass: sessions changed since the last pass (or
with an overflowing L1) that are busy get a job, as do jobs left `pending` (enqueue lost
while Redis was down) or `running` far past their timeout (worker and job lost).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import asyncpg
from arq import Retry

from app.core import tracing
from app.core.config import Settings
from app.core.db import transaction
from app.core.queue import Queue
from app.core.tokens import count_message
from app.jobs import metrics, repository
from app.jobs.followup import after_job
from app.jobs.lease import lease_lost
from app.jobs.service import enqueue_compression
from app.llm import usage
from app.llm.client import LLMClient
from app.llm.errors import LLMError
from app.memory import pressure as triggers
from app.memory.errors import StaleMemoryState
from app.memory.heuristic_summariser import SummaryDraft
from app.memory.llm_summariser import summarise
from app.memory.policy import DEFAULT_L1_MAX_MESSAGES
from app.memory.service import (
    CompressionPlan,
    CompressionRange,
    apply_compression,
    plan_compression,
)
from app.sessions import repository as sessions_repository
from app.state import worker_state

log = logging.getLogger("loom.jobs.compress")

RANGES_PER_APPLY = 4
MAX_APPLIES = 200  # per job try; a longer backlog continues in the next job
MAX_STALE_REPLANS = 5
MAX_BACKOFF_SECONDS = 300.0
CRON_LAST_PASS_KEY = "loom:compress:last-pass:{queue}"


class Stores(Protocol):
    """What a compression uses: the worker's state (`app.state.WorkerState`), or the app's
    (`app.state.AppState`) for `POST .../memory/compress?wait=true`."""

    settings: Settings
    llm: LLMClient | None
    queue: Queue

    def db_connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]: ...


def _never_lost() -> bool:
    return False


class LeaseLost(Exception):
    """This worker's lease on the job expired and another worker took the job."""


@dataclasses.dataclass
class Outcome:
    summaries: int = 0
    tokens_saved: int = 0
    methods: dict[str, int] = dataclasses.field(default_factory=dict)


def backoff_seconds(base: float, job_try: int) -> float:
    """Delay before try `job_try + 1`: base, 2*base, 4*base ... capped at 5 minutes."""
    return min(MAX_BACKOFF_SECONDS, base * (2 ** max(0, job_try - 1)))


def _first_batch(plan: CompressionPlan, n: int) -> CompressionPlan:
    """The plan cut to its first `n` ranges: still a prefix of L1, so still valid."""
    if len(plan.ranges) <= n:
        return plan
    policy_plan = dataclasses.replace(plan.policy_plan, ranges=plan.policy_plan.ranges[:n])
    return dataclasses.replace(plan, ranges=plan.ranges[:n], policy_plan=policy_plan)


def _covered_tokens(r: CompressionRange) -> int:
    return sum(
        count_message(m.get("role", ""), m.get("content"), m.get("tool_calls")) for m in r.messages
    )


def _tokens_saved(plan: CompressionPlan, drafts: list[SummaryDraft]) -> int:
    covered = sum(_covered_tokens(r) for r in plan.ranges)
    return max(0, covered - sum(d.token_count for d in drafts))


def worth_writing(plan: CompressionPlan, drafts: list[SummaryDraft]) -> int:
    """How many of the plan's leading ranges to replace by their summaries: up to the first
    whose summary is the heuristic fallback and is not shorter than the messages it would
    replace (two short turns make a longer heuristic summary: its header, "User said: ...",
    "Assistant replied: ..."). Those messages stay in L1 until later turns make a range
    whose summary saves tokens. An LLM summary is kept whatever its length: it was paid
    for, and asking again would cost as much."""
    for i, (r, d) in enumerate(zip(plan.ranges, drafts, strict=True)):
        if d.method == "heuristic" and d.token_count >= _covered_tokens(r):
            return i
    return len(plan.ranges)


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


async def run_compression(
    state: Stores,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    force: bool,
    llm_fallback: bool,
    lost: Callable[[], bool] = _never_lost,
) -> Outcome:
    """Plan / summarise / apply until nothing is due. Raises on failure (see module doc);
    `lost`: whether the job's lease went to another worker (`app.jobs.lease`)."""
    connect = state.db_connection
    settings = state.settings
    outcome = Outcome()
    stale = 0
    for _ in range(MAX_APPLIES):
        async with connect() as conn:  # reads only
            row = await sessions_repository.get(conn, tenant_id, session_id)
            if row is None:  # deleted meanwhile: nothing to do
                return outcome
            plan = await plan_compression(conn, row, force=force and outcome.summaries == 0)
        if plan is None:
            return outcome
        plan = _first_batch(plan, RANGES_PER_APPLY)
        # the summaries' LLM calls, for the cost ledger and the tenant's budget: past it,
        # the client refuses them and `summarise` falls back to the heuristic
        usage.attribute("summary", tenant_id, session_id=session_id)
        drafts = list(
            await asyncio.gather(
                *(
                    summarise(
                        state.llm,
                        r.messages,
                        max_tokens=settings.summary_max_tokens,
                        max_input_tokens=settings.summary_input_tokens,
                        fallback=llm_fallback,
                    )
                    for r in plan.ranges
                )
            )
        )
        if lost():  # another worker runs this job now (app/jobs/lease.py)
            raise LeaseLost
        keep = worth_writing(plan, drafts)
        last = keep < len(plan.ranges)  # the rest waits for more messages: stop after this
        if last:
            if keep == 0 and not plan.snapshot_l2:
                return outcome
            plan, drafts = _first_batch(plan, keep), drafts[:keep]
        try:
            async with transaction(connect) as conn:
                row = await sessions_repository.get(conn, tenant_id, session_id)
                if row is None:
                    return outcome
                with tracing.memory_span("update_memory", session_id, store_kind="session"):
                    await apply_compression(conn, row, plan, drafts)  # the L2 write
        except StaleMemoryState:  # rolled back
            stale += 1
            if stale > MAX_STALE_REPLANS:
                raise
            log.info("memory of %s moved during compression; re-planning", session_id)
            continue
        outcome.summaries += len(drafts)
        outcome.tokens_saved += _tokens_saved(plan, drafts)
        for d in drafts:
            outcome.methods[d.method] = outcome.methods.get(d.method, 0) + 1
            metrics.SUMMARIES.labels(method=d.method).inc()
        if last:
            return outcome
    return outcome


async def _record(
    state: Stores, fn: Callable[..., Awaitable[None]], *args: Any, **kwargs: Any
) -> None:
    """Write job status; bookkeeping must never decide the job's fate."""
    try:
        async with transaction(state.db_connection) as conn:
            await fn(conn, *args, **kwargs)
    except Exception as exc:
        log.warning("could not record compression job status: %s", type(exc).__name__)


async def compress_session(
    ctx: dict[str, Any], tenant_id: str, session_id: str, force: bool = False
) -> dict[str, Any]:
    """arq job: compress one session's memory (see module docstring). `force` (an explicit
    `POST .../memory/compress`) compresses even below the thresholds."""
    state = worker_state(ctx)
    settings = state.settings
    tid, sid = uuid.UUID(str(tenant_id)), uuid.UUID(str(session_id))
    job_try = int(ctx.get("job_try") or 1)
    job_id = str(ctx.get("job_id") or f"compress:{sid}")
    max_tries = settings.compress_max_tries
    llm_fallback = job_try >= min(settings.compress_llm_tries, max_tries)
    after_job(ctx, lambda: requeue_if_asked(state, tid, sid))
    await _record(state, repository.mark_running, tid, sid, job_id, job_try)
    try:
        async with asyncio.timeout(settings.compress_job_timeout_seconds):
            outcome = await run_compression(
                state,
                tid,
                sid,
                force=force,
                llm_fallback=llm_fallback,
                lost=lambda: lease_lost(ctx),
            )
    except LeaseLost:  # the worker that took the job over records its outcome
        log.warning("compression of %s handed over to another worker", sid)
        return {"summaries": 0, "lease_lost": True}
    except LLMError as exc:  # retryable and the LLM still gets another chance
        return await _retry_or_fail(state, tid, sid, job_try, f"LLM unavailable: {exc.message}")
    except Exception as exc:
        log.warning(
            "compression of %s failed (try %d/%d): %s", sid, job_try, max_tries, _error_text(exc)
        )
        return await _retry_or_fail(state, tid, sid, job_try, _error_text(exc))
    await _record(
        state,
        repository.mark_finished,
        tid,
        sid,
        ok=True,
        error=None,
        summaries=outcome.summaries,
        tokens_saved=outcome.tokens_saved,
    )
    metrics.JOBS_RUN.inc()
    metrics.TOKENS_SAVED.inc(outcome.tokens_saved)
    if outcome.summaries:
        log.info(
            "compressed %s: %d summaries %s, %d tokens saved",
            sid,
            outcome.summaries,
            outcome.methods,
            outcome.tokens_saved,
        )
    return {
        "summaries": outcome.summaries,
        "methods": outcome.methods,
        "tokens_saved": outcome.tokens_saved,
    }


async def requeue_if_asked(state: Stores, tenant_id: uuid.UUID, session_id: uuid.UUID) -> bool:
    """After the job has fully ended: a compression asked for since it started (the row
    says `pending`, or was asked while `running`) is enqueued now (module doc)."""
    async with state.db_connection() as conn:
        asked = await repository.asked_since_start(conn, tenant_id, session_id)
    if not asked:
        return False
    return await enqueue_compression(
        state.queue, state.db_connection, tenant_id, session_id, trigger="requeue"
    )


async def _retry_or_fail(
    state: Stores, tid: uuid.UUID, sid: uuid.UUID, job_try: int, error: str
) -> dict[str, Any]:
    settings = state.settings
    if job_try >= settings.compress_max_tries:
        await _record(
            state,
            repository.mark_finished,
            tid,
            sid,
            ok=False,
            error=error,
            summaries=0,
            tokens_saved=0,
        )
        metrics.JOBS_RUN.inc()
        metrics.JOBS_FAILED.inc()
        log.error("compression of %s gave up after %d tries: %s", sid, job_try, error)
        # Returning (not raising) keeps arq from storing a result under the job id, which
        # would block the next enqueue of this session for keep_result seconds.
        return {"failed": error}
    await _record(state, repository.mark_retrying, tid, sid, error)
    metrics.JOBS_RETRIED.inc()
    raise Retry(defer=backoff_seconds(settings.compress_retry_base_seconds, job_try))


async def compress_busy_sessions(ctx: dict[str, Any]) -> dict[str, int]:
    """arq cron: enqueue compression for busy sessions and for lost jobs."""
    state = worker_state(ctx)
    settings, connect, redis = state.settings, state.db_connection, state.redis
    now = datetime.now(UTC)
    interval = timedelta(seconds=settings.compress_cron_seconds)
    key = CRON_LAST_PASS_KEY.format(queue=settings.queue_name)
    since = now - timedelta(days=1)
    last = None
    try:
        last = await redis.get(key)
        if last:
            since = max(since, datetime.fromtimestamp(float(last), UTC) - 2 * interval)
    except Exception:
        pass
    # The first pass of a worker that just (re)connected, or on a Redis that lost its data,
    # re-enqueues every pending job at once: their enqueue may have failed while Redis was
    # unreachable (a job still queued is deduplicated by its id, so this is harmless).
    # Otherwise a pending job counts as lost after two intervals.
    cron_state = state.cron_state
    first_pass = last is None or not cron_state.get("passes")
    cron_state["passes"] = cron_state.get("passes", 0) + 1
    async with connect() as db:
        lost = await repository.stale_jobs(
            db,
            pending_before=now if first_pass else now - 2 * interval,
            running_before=now - timedelta(seconds=2 * settings.compress_job_timeout_seconds + 60),
            limit=settings.compress_cron_batch,
        )
        candidates = await repository.busy_candidates(
            db,
            since=since,
            default_l1_max=DEFAULT_L1_MAX_MESSAGES,
            limit=settings.compress_cron_batch,
        )
        busy = []
        for tid, sid in candidates:
            row = await repository.pressure(db, tid, sid)
            if row is not None and triggers.is_busy(
                triggers.pressure_from_row(row), settings.compress_busy_usage
            ):
                busy.append((tid, sid))
    enqueued = 0
    for tid, sid in dict.fromkeys([*lost, *busy]):
        if await enqueue_compression(state.queue, connect, tid, sid, trigger="cron"):
            enqueued += 1
    try:
        await redis.set(key, str(now.timestamp()))
    except Exception:
        pass
    return {"busy": len(busy), "lost": len(lost), "enqueued": enqueued}


async def compress_and_wait(
    state: Stores, tenant_id: uuid.UUID, session_id: uuid.UUID, *, within: float
) -> Outcome | None:
    """Compress one session now, in the caller (`POST .../memory/compress?wait=true`):
    the job's own plan / summarise / apply loop, forced like an explicit request, with the
    LLM when one is configured and the heuristic at once if it fails (a request can't wait
    for backoff). The job row says `running`, then `succeeded`. Returns None when
    `within` seconds pass first (work applied so far stays; a queued job finishes the rest).
    A worker running the same job at the same time is harmless: every apply re-checks the
    state version."""
    job_id = f"compress:{session_id}"
    await _record(state, repository.mark_running, tenant_id, session_id, job_id, 1)
    try:
        async with asyncio.timeout(within):
            outcome = await run_compression(
                state, tenant_id, session_id, force=True, llm_fallback=True
            )
    except TimeoutError:
        return None
    except Exception as exc:
        await _record(
            state,
            repository.mark_finished,
            tenant_id,
            session_id,
            ok=False,
            error=_error_text(exc),
            summaries=0,
            tokens_saved=0,
        )
        raise
    await _record(
        state,
        repository.mark_finished,
        tenant_id,
        session_id,
        ok=True,
        error=None,
        summaries=outcome.summaries,
        tokens_saved=outcome.tokens_saved,
    )
    return outcome

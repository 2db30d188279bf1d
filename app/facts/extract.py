"""Fact extraction as a pipeline: new messages of a session -> two LLM steps ->
one transaction per batch.

`run_extraction` loops over batches of the messages after the session's watermark (the
job is started by `app.facts.trigger`: N new messages, T seconds of quiet, or a flush);
each batch goes through these steps, one function each, called in this order:

1. `app.facts.batch.read_batch`: read the next messages, and select what the first call
   shows with them (the scope's attributes and learned aliases, the stored facts bearing
   on them); the batch is as many messages as keep the rendered prompt within
   `LOOM_FACTS_INPUT_TOKENS` (short transaction, rolled back);
2. `app.facts.propose.propose`: the first call (`record_facts`), outside any transaction:
   candidates, repaired, keys named by their attribute, in time order;
3. `app.facts.decide.decide`: select the stored facts that could conflict with them
   (`app.facts.selection.stored_for_decision`) and make the second call (`decide_facts`),
   or skip it when nothing could be affected;
4. `apply_batch` (`app.facts.apply.apply`, one transaction): re-read the watermark under a
   row lock (it must not have moved: another run applied this batch -> re-plan), lock the
   scope and the targeted facts, write every operation and its version row, keep each
   attribute to one truth, and advance the watermark to the batch's last seq;
5. `count`: the run's outcome; every LLM call's usage is recorded as it returns
   (`app.facts.usage.ask`: a killed attempt's calls count too).

A crash before the commit writes nothing of the batch, and the next run reads it again; a
crash after it never reads it again: no fact is lost or doubled. A model answer that
cannot be applied raises `FactOutputError` before anything is written. Only one run reads
a session's batches at a time (`app.facts.tasks.claimed`). `run_range` re-runs a failed
range (`retry_failed`) without touching the watermark.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import asyncpg

from app.facts import metrics
from app.facts import state as runs
from app.facts.apply import Applied, CommitPoint, Proposal, StaleFacts, apply
from app.facts.batch import read_batch
from app.facts.decide import decide
from app.facts.policy import FactsConfig
from app.facts.propose import propose
from app.facts.run import Deps, LeaseLost, Outcome, connected, fact_scope
from app.knowledge.scopes import Scope
from app.knowledge.versions import Actor

__all__ = [
    "Deps",
    "LeaseLost",
    "Outcome",
    "fact_scope",
    "run_extraction",
    "run_range",
    "stated_range",
    "tail_due",
]

log = logging.getLogger("loom.facts")

MAX_BATCHES = 100  # per run; a longer backlog continues in the next run
MAX_STALE_REPLANS = 5


def tail_due(watermark: int, began: int, last: int, every: int) -> bool:
    """Whether a run reads on: what waited when it began (`began`, its last seq then) is
    always read; past it, only while `every` messages wait."""
    return watermark < began or last - watermark >= every


def count(outcome: Outcome, proposal: Proposal, applied: Applied, messages: int) -> None:
    """Step 5: what the batch did, into the run's outcome."""
    metrics.MESSAGES.inc(proposal.last_seq - proposal.first_seq + 1)
    outcome.current = None
    outcome.messages += messages
    outcome.batches += 1
    outcome.added += applied.added
    outcome.updated += applied.updated
    outcome.invalidated += applied.invalidated
    outcome.unchanged += applied.unchanged
    outcome.history += applied.history
    outcome.automatic += applied.automatic
    outcome.dropped += proposal.dropped
    outcome.repaired += proposal.repaired
    if proposal.dropped:
        metrics.DROPPED.inc(proposal.dropped)


def _watermark_point(
    tenant_id: uuid.UUID, session_id: uuid.UUID, expected: int, last_seq: int
) -> CommitPoint:
    async def check_and_advance(conn: asyncpg.Connection) -> None:
        await runs.ensure_state(conn, tenant_id, session_id)
        state = await runs.get_state(conn, tenant_id, session_id, for_update=True)
        assert state is not None
        if state.watermark_seq != expected:
            raise StaleFacts("the watermark moved")
        await runs.advance(conn, tenant_id, session_id, last_seq)

    return check_and_advance


async def apply_batch(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    scope: Scope,
    agent_id: str,
    proposal: Proposal,
    point: CommitPoint,
) -> Applied:
    """Step 4: the batch's operations and its commit point, in one transaction."""
    async with connected(deps.connect, commit=True) as conn:
        applied = await apply(
            conn,
            tenant_id,
            session_id,
            scope,
            proposal,
            point,
            actor=Actor("extraction", None, agent_id),
            max_items=int(deps.settings.knowledge_max_items),
        )
    return applied


async def _session(deps: Deps, tenant_id: uuid.UUID, session_id: uuid.UUID) -> Any:
    async with connected(deps.connect, commit=False) as conn:
        return await runs.session_facts(conn, tenant_id, session_id)


async def run_extraction(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    lease_lost: Callable[[], bool] = lambda: False,
    outcome: Outcome | None = None,
    upto: int | None = None,
    short_tail: bool = True,
) -> Outcome:
    """Extract batch after batch until every message (up to `upto`, default the newest)
    is read (see module doc). `outcome` is filled as it goes (LLM usage counts even when a
    later step fails). With `short_tail=False` (the job's runs), messages that arrived
    after the run began are read only while `min_batch` of them wait (`tail_due`): a
    short tail is the next run's, which its trigger schedules (turns 1 s apart
    cost a run of two messages after each full one)."""
    outcome = outcome if outcome is not None else Outcome()
    ids = (tenant_id, session_id)
    stale = 0
    began: int | None = None
    for _ in range(MAX_BATCHES):
        info = await _session(deps, tenant_id, session_id)
        if info is None:
            return outcome
        cfg = FactsConfig.from_stored(info.config.get("facts"))
        outcome.watermark = info.watermark
        if not cfg.enabled:
            outcome.skipped = outcome.skipped or "disabled"
            return outcome
        last = info.last_seq if upto is None else min(upto, info.last_seq)
        if last <= info.watermark:
            return outcome
        began = last if began is None else began
        every = cfg.every(int(deps.settings.facts_every_messages))
        if not short_tail and not tail_due(info.watermark, began, last, every):
            return outcome
        scope = fact_scope(cfg, info.agent_id, info.user_id)
        batch = await read_batch(deps, tenant_id, session_id, info, scope, info.watermark, last)
        if not batch.rows:
            return outcome
        outcome.current = (batch.rows[0].seq, batch.rows[-1].seq)
        proposed = await propose(deps, outcome, ids, batch)
        proposal = await decide(deps, outcome, ids, scope, batch, proposed)
        if lease_lost():
            raise LeaseLost
        point = _watermark_point(tenant_id, session_id, info.watermark, proposal.last_seq)
        try:
            applied = await apply_batch(
                deps, tenant_id, session_id, scope, info.agent_id, proposal, point
            )
        except StaleFacts as exc:
            stale += 1
            if stale > MAX_STALE_REPLANS:
                raise
            log.info("facts of %s moved during extraction (%s); re-planning", session_id, exc)
            continue
        outcome.watermark = proposal.last_seq
        count(outcome, proposal, applied, len(batch.rows))
    return outcome


def _range_point(
    tenant_id: uuid.UUID, session_id: uuid.UUID, first: int, last_seq: int
) -> CommitPoint:
    """A failed range's batch: the range must still start at `first`; it then starts after
    the batch (and is gone once read)."""

    async def check_and_shrink(conn: asyncpg.Connection) -> None:
        state = await runs.get_state(conn, tenant_id, session_id, for_update=True)
        ranges = list(state.failed_ranges or []) if state is not None else []
        match = [r for r in ranges if int(r["first_seq"]) == first]
        if not match:
            raise StaleFacts("the failed range moved")
        r = match[0]
        rest = [x for x in ranges if x is not r]
        if last_seq < int(r["last_seq"]):
            rest.append({**r, "first_seq": last_seq + 1})
        await runs.set_failed_ranges(
            conn, tenant_id, session_id, sorted(rest, key=lambda x: int(x["first_seq"]))
        )

    return check_and_shrink


async def run_range(
    deps: Deps, tenant_id: uuid.UUID, session_id: uuid.UUID, first: int, last: int, outcome: Outcome
) -> Outcome:
    """Re-run a failed range (batch after batch, the same steps); older statements apply
    as history."""
    ids = (tenant_id, session_id)
    start = first
    while start <= last:
        info = await _session(deps, tenant_id, session_id)
        if info is None:
            return outcome
        cfg = FactsConfig.from_stored(info.config.get("facts"))
        scope = fact_scope(cfg, info.agent_id, info.user_id)
        batch = await read_batch(deps, tenant_id, session_id, info, scope, start - 1, last)
        if not batch.rows:
            return outcome
        outcome.current = (batch.rows[0].seq, batch.rows[-1].seq)
        proposed = await propose(deps, outcome, ids, batch)
        proposal = await decide(deps, outcome, ids, scope, batch, proposed)
        point = _range_point(tenant_id, session_id, start, proposal.last_seq)
        applied = await apply_batch(
            deps, tenant_id, session_id, scope, info.agent_id, proposal, point
        )
        count(outcome, proposal, applied, len(batch.rows))
        start = proposal.last_seq + 1
    return outcome


def stated_range(first: int, last: int, error: str, at: datetime) -> dict[str, Any]:
    return {"first_seq": first, "last_seq": last, "error": error[:300], "at": at.isoformat()}

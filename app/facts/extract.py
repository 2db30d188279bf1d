"""Fact extraction: new messages of a session -> two LLM steps -> one transaction.

`run_extraction` loops over batches of the messages after the session's watermark (the
job is started by `app.facts.trigger`: N new messages, T seconds of quiet, or a flush):

1. read (short transaction): the session, its facts config and watermark, the next
   messages, and the scope's stored facts that bear on them; the batch is as many
   messages as keep the *rendered* step-1 prompt within `LOOM_FACTS_INPUT_TOKENS`;
2. ask the LLM, outside any transaction: candidate facts of the batch (each with a key and
   maybe an event time), put in time order; then one decision per candidate against the
   scope's stored valid facts: all of them when they fit the prompt, else those sharing a
   candidate's key and the best text matches (`app.knowledge.timeline.choose_shown`). The
   decision call is skipped when no stored fact could be affected (none shares a
   candidate's key or words beyond the scope's stop words) and no two candidates share a
   key: everything is ADD;
3. apply (one transaction, `app.facts.apply`): re-read the watermark under a row lock (it
   must not have moved: another run applied this batch -> re-plan), lock the scope and the
   targeted facts (each must still be valid -> else re-plan), write every operation and
   its version row, and advance the watermark to the batch's last seq.

A crash before the commit writes nothing of the batch, and the next run reads it again; a
crash after it never reads it again: no fact is lost or doubled. A model answer that
cannot be applied raises `FactOutputError` before anything is written. Every LLM call's
usage is recorded as soon as it returns (a killed attempt's calls count too).
`run_range` re-runs a failed range (`retry_failed`) without touching the watermark.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.tokens import count_text
from app.facts import metrics, prompts
from app.facts import repository as repo
from app.facts.apply import Candidate, CommitPoint, Proposal, StaleFacts, apply
from app.facts.policy import (
    FactOutputError,
    FactsConfig,
    Operation,
    check_candidates,
    holds_one_value,
    plan_operations,
)
from app.facts.repair import Salvaged, salvage_candidates
from app.facts.selection import (
    fit_batch,
    fixed_tokens,
    key_vocabulary,
    known_facts,
    stored_for_decision,
)
from app.knowledge.scopes import Scope, agent_scope, parse_scope, user_scope
from app.knowledge.timeline import parse_event_time, time_order
from app.knowledge.versions import Actor
from app.llm.client import LLMClient
from app.llm.errors import LLMError

log = logging.getLogger("loom.facts")

MAX_BATCHES = 100  # per run; a longer backlog continues in the next run
MAX_STALE_REPLANS = 5
_READ_LIMIT = 500  # messages read per batch at most (the token cap usually ends it first)


class LeaseLost(Exception):
    """Another worker took this job over (app/jobs/lease.py)."""


@dataclasses.dataclass
class Outcome:
    batches: int = 0
    messages: int = 0
    added: int = 0
    updated: int = 0
    invalidated: int = 0
    unchanged: int = 0
    history: int = 0
    automatic: int = 0  # superseded by the one-value safety net (issue 37)
    # candidates of the model's answers dropped as irreparable, and repaired (issue 37)
    dropped: int = 0
    repaired: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    watermark: int = 0
    skipped: str | None = None
    # the batch being worked on (first and last seq): what a final failure marks failed
    current: tuple[int, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("current")
        return out


@dataclasses.dataclass(frozen=True)
class Deps:
    sessionmaker: async_sessionmaker[AsyncSession]
    llm: LLMClient | None
    settings: Settings


def fact_scope(cfg: FactsConfig, agent_id: str, user_id: str | None = None) -> Scope:
    """The scope the session's facts live in (`agent` = the session's agent; `user` = the
    session's user, or the agent's tier for a session without a user)."""
    scope = parse_scope(cfg.scope)
    if scope.kind == "user" and scope.id is None:
        return user_scope(user_id) if user_id else agent_scope(agent_id)
    return agent_scope(agent_id) if scope.kind == "agent" else scope


async def _record_usage(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    calls: int,
    input_tokens: int,
    output_tokens: int,
) -> None:
    try:
        async with deps.sessionmaker() as db:
            await repo.add_usage(
                db,
                tenant_id,
                session_id,
                calls=calls,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
            )
            await db.commit()
    except Exception as exc:  # bookkeeping never decides the job's fate
        log.warning("could not record fact extraction usage: %s", type(exc).__name__)


async def _ask(
    deps: Deps,
    outcome: Outcome,
    ids: tuple[uuid.UUID, uuid.UUID],
    step: str,
    system: str,
    prompt: str,
    tool: str,
    description: str,
    model: type[BaseModel],
    parse: Callable[[Any], Any] | None = None,
) -> Any:
    """One structured call, its usage recorded; the answer validated by `model` (or read
    by `parse`, which raises `FactOutputError`)."""
    assert deps.llm is not None
    outcome.llm_calls += 1
    metrics.LLM_CALLS.labels(step=step).inc()
    try:
        answer = await deps.llm.structured(
            system,
            prompt,
            tool_name=tool,
            tool_description=description,
            schema=prompts.tool_schema(model),
            max_tokens=int(deps.settings.facts_max_tokens),
        )
    except LLMError:  # a call that failed still counts (its tokens are unknown)
        await _record_usage(deps, *ids, 1, 0, 0)
        raise
    outcome.input_tokens += answer.input_tokens
    outcome.output_tokens += answer.output_tokens
    await _record_usage(deps, *ids, 1, answer.input_tokens, answer.output_tokens)
    metrics.LLM_TOKENS.labels(step=step, direction="input").inc(answer.input_tokens)
    metrics.LLM_TOKENS.labels(step=step, direction="output").inc(answer.output_tokens)
    if parse is not None:
        return parse(answer.data)
    try:
        return model.model_validate(answer.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise FactOutputError(
            f"{step}: the answer does not match the schema ({where}: {first['msg']})"
        ) from None


def tail_due(watermark: int, began: int, last: int, every: int) -> bool:
    """Whether a run reads on: what waited when it began (`began`, its last seq then) is
    always read; past it, only while `every` messages wait."""
    return watermark < began or last - watermark >= every


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def split_restatements(
    found: list[prompts.CandidateFact],
) -> tuple[list[prompts.CandidateFact], list[tuple[int, prompts.CandidateFact]]]:
    """The first statement of each fact, and its restatements later in the batch (index of
    the first, the restatement with only its new seqs), so that one batch records what ten
    would: the fact from its first statement, then a `confirm` per restatement; a
    restatement never moves `valid_from` (issue 37). A repeated text after another state
    of its key ("Paris", "Berlin", "Paris" again) is a new statement, not a restatement."""
    order = sorted(range(len(found)), key=lambda i: (min(found[i].source_seqs), i))
    firsts: list[prompts.CandidateFact] = []
    again: list[tuple[int, prompts.CandidateFact]] = []
    by_text: dict[str, int] = {}
    last_of_key: dict[str, str] = {}
    for i in order:
        c = found[i]
        text = _norm(c.text)
        j = by_text.get(text)
        if j is not None and last_of_key.get(c.key, text) == text:
            seen = set(firsts[j].source_seqs).union(
                *(set(x.source_seqs) for k, x in again if k == j)
            )
            new = sorted(set(c.source_seqs) - seen)
            if new:
                again.append((j, c.model_copy(update={"source_seqs": new})))
        else:
            by_text[text] = len(firsts)
            firsts.append(c)
        last_of_key[c.key] = text
    return firsts, sorted(again, key=lambda p: p[1].source_seqs[0])


def _candidate(c: prompts.CandidateFact, at: dict[int, datetime]) -> Candidate:
    """A candidate with its times: stated when first said (its earliest message: a
    restatement never moves it), valid from the event time when given, else then."""
    stated = min(at[s] for s in c.source_seqs)
    try:
        event = parse_event_time(c.valid_from, stated)
    except ValueError:  # "2026-02-30": repaired as no event time (issue 37)
        event = None
    return Candidate(
        c.text.strip(),
        c.key,
        c.importance,
        list(c.tags),
        sorted(set(c.source_seqs)),
        event or stated,
        stated,
        holds_one_value(c.key, c.one_value),
    )


def candidates_in_time_order(
    found: list[prompts.CandidateFact], rows: list[repo.BatchRow]
) -> tuple[list[Candidate], list[tuple[int, Candidate]]]:
    """The batch's first statements sorted by when they became true, and the restatements
    (index into that list, candidate): `split_restatements`."""
    at = {r.seq: r.created_at for r in rows}
    firsts, again = split_restatements(found)
    out = [_candidate(c, at) for c in firsts]
    order = time_order([(c.valid_from, c.stated_at, c.seqs[0]) for c in out])
    position = {old: new for new, old in enumerate(order)}
    restated = sorted(
        ((position[j], _candidate(c, at)) for j, c in again), key=lambda p: p[1].seqs[0]
    )
    return [out[i] for i in order], restated


def _new_facts(cands: list[Candidate], session_id: uuid.UUID) -> list[prompts.NewFact]:
    return [
        prompts.NewFact(c.text, c.key, c.valid_from, c.stated_at, str(session_id), c.seqs)
        for c in cands
    ]


async def propose(
    deps: Deps,
    outcome: Outcome,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    info: repo.SessionFacts,
    scope: Scope,
    rows: list[repo.BatchRow],
    messages: list[prompts.BatchMessage],
    known: list[prompts.ShownFact],
    keys: list[tuple[str, int]] | None = None,
) -> Proposal:
    """Steps 1 and 2 for one batch (LLM calls; no write)."""
    keys = keys or []
    cap = int(deps.settings.facts_input_tokens)
    ids = (tenant_id, session_id)
    first, last = rows[0].seq, rows[-1].seq
    if not messages:
        return Proposal(first, last, [], ())
    batch_seqs = {r.seq for r in rows}
    found: Salvaged = await _ask(
        deps,
        outcome,
        ids,
        "extract",
        prompts.EXTRACT_SYSTEM,
        prompts.render_batch(messages, known, keys),
        prompts.EXTRACT_TOOL,
        prompts.EXTRACT_TOOL_DESCRIPTION,
        prompts.CandidatesOut,
        parse=lambda data: salvage_candidates(data, batch_seqs),
    )
    check_candidates(found.facts, batch_seqs)
    cands, restated = candidates_in_time_order(found.facts, rows)
    dropped, repaired = found.dropped, found.repaired
    if not cands:
        return Proposal(first, last, [], (), dropped=dropped, repaired=repaired)
    news = _new_facts(cands, session_id)
    budget = (
        cap
        - fixed_tokens(prompts.DECIDE_SYSTEM, prompts.DecisionsOut)
        - count_text(prompts.render_decisions(news, []))
    )
    async with deps.sessionmaker() as db:
        stored, related = await stored_for_decision(
            db, tenant_id, scope, info.agent_id, cands, max(0, budget)
        )
        await db.rollback()
    cand_keys = [c.key for c in cands if c.key]
    if not related and len(set(cand_keys)) == len(cand_keys):  # nothing affected: all new
        return Proposal(
            first,
            last,
            cands,
            tuple(Operation("add", i) for i in range(len(cands))),
            dropped=dropped,
            repaired=repaired,
            restated=restated,
        )
    decided = await _ask(
        deps,
        outcome,
        ids,
        "decide",
        prompts.DECIDE_SYSTEM,
        prompts.render_decisions(news, stored),
        prompts.DECIDE_TOOL,
        prompts.DECIDE_TOOL_DESCRIPTION,
        prompts.DecisionsOut,
    )
    shown = {f.id for f in stored}
    plan = plan_operations(decided.decisions, len(cands), [shown] * len(cands))
    return Proposal(
        first,
        last,
        cands,
        plan.operations,
        plan.unchanged,
        dropped=dropped,
        repaired=repaired,
        restated=restated,
    )


async def _read_batch(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    info: repo.SessionFacts,
    scope: Scope,
    after: int,
    upto: int,
) -> Batch:
    cap = int(deps.settings.facts_input_tokens)
    async with deps.sessionmaker() as db:
        rows = await repo.messages_after(
            db, tenant_id, session_id, after=after, upto=upto, limit=_READ_LIMIT
        )
        if not rows:
            await db.rollback()
            return Batch([], [], [], [])
        known = await known_facts(db, tenant_id, scope, info.agent_id, rows, cap)
        keys = await key_vocabulary(db, tenant_id, scope, info.agent_id, known, cap)
        await db.rollback()
    taken, messages = fit_batch(rows, info.agent_id, known, cap, keys)
    return Batch(taken, messages, known, keys)


@dataclasses.dataclass(frozen=True)
class Batch:
    """The messages of one batch and what step 1 shows with them."""

    rows: list[repo.BatchRow]
    messages: list[prompts.BatchMessage]
    known: list[prompts.ShownFact]
    keys: list[tuple[str, int]]


def _count(outcome: Outcome, proposal: Proposal, applied: Any) -> None:
    metrics.MESSAGES.inc(proposal.last_seq - proposal.first_seq + 1)
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
    async def check_and_advance(db: AsyncSession) -> None:
        await repo.ensure_state(db, tenant_id, session_id)
        state = await repo.get_state(db, tenant_id, session_id, for_update=True)
        assert state is not None
        if state.watermark_seq != expected:
            raise StaleFacts("the watermark moved")
        await repo.advance(db, tenant_id, session_id, last_seq)

    return check_and_advance


async def _apply(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    scope: Scope,
    agent_id: str,
    proposal: Proposal,
    point: CommitPoint,
) -> Any:
    async with deps.sessionmaker() as db:
        applied = await apply(
            db,
            tenant_id,
            session_id,
            scope,
            proposal,
            point,
            actor=Actor("extraction", None, agent_id),
            max_items=int(deps.settings.knowledge_max_items),
        )
        await db.commit()
    return applied


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
    short tail is the next run's, which its trigger schedules (issue 37: turns 1 s apart
    cost a run of two messages after each full one)."""
    outcome = outcome if outcome is not None else Outcome()
    stale = 0
    began: int | None = None
    for _ in range(MAX_BATCHES):
        async with deps.sessionmaker() as db:
            info = await repo.session_facts(db, tenant_id, session_id)
            await db.rollback()
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
        if not short_tail and not tail_due(
            info.watermark, began, last, cfg.every(int(deps.settings.facts_every_messages))
        ):
            return outcome
        scope = fact_scope(cfg, info.agent_id, info.user_id)
        batch = await _read_batch(deps, tenant_id, session_id, info, scope, info.watermark, last)
        rows = batch.rows
        if not rows:
            return outcome
        outcome.current = (rows[0].seq, rows[-1].seq)
        proposal = await propose(
            deps,
            outcome,
            tenant_id,
            session_id,
            info,
            scope,
            rows,
            batch.messages,
            batch.known,
            batch.keys,
        )
        if lease_lost():
            raise LeaseLost
        try:
            applied = await _apply(
                deps,
                tenant_id,
                session_id,
                scope,
                info.agent_id,
                proposal,
                _watermark_point(tenant_id, session_id, info.watermark, proposal.last_seq),
            )
        except StaleFacts as exc:
            stale += 1
            if stale > MAX_STALE_REPLANS:
                raise
            log.info("facts of %s moved during extraction (%s); re-planning", session_id, exc)
            continue
        outcome.current = None
        outcome.watermark = proposal.last_seq
        outcome.messages += len(rows)
        _count(outcome, proposal, applied)
    return outcome


def _range_point(
    tenant_id: uuid.UUID, session_id: uuid.UUID, first: int, last_seq: int
) -> CommitPoint:
    """A failed range's batch: the range must still start at `first`; it then starts after
    the batch (and is gone once read)."""

    async def check_and_shrink(db: AsyncSession) -> None:
        state = await repo.get_state(db, tenant_id, session_id, for_update=True)
        ranges = list(state.failed_ranges or []) if state is not None else []
        match = [r for r in ranges if int(r["first_seq"]) == first]
        if not match:
            raise StaleFacts("the failed range moved")
        r = match[0]
        rest = [x for x in ranges if x is not r]
        if last_seq < int(r["last_seq"]):
            rest.append({**r, "first_seq": last_seq + 1})
        await repo.set_failed_ranges(
            db, tenant_id, session_id, sorted(rest, key=lambda x: int(x["first_seq"]))
        )

    return check_and_shrink


async def run_range(
    deps: Deps, tenant_id: uuid.UUID, session_id: uuid.UUID, first: int, last: int, outcome: Outcome
) -> Outcome:
    """Re-run a failed range (batch after batch); older statements apply as history."""
    start = first
    while start <= last:
        async with deps.sessionmaker() as db:
            info = await repo.session_facts(db, tenant_id, session_id)
            await db.rollback()
        if info is None:
            return outcome
        cfg = FactsConfig.from_stored(info.config.get("facts"))
        scope = fact_scope(cfg, info.agent_id, info.user_id)
        batch = await _read_batch(deps, tenant_id, session_id, info, scope, start - 1, last)
        rows = batch.rows
        if not rows:
            return outcome
        outcome.current = (rows[0].seq, rows[-1].seq)
        proposal = await propose(
            deps,
            outcome,
            tenant_id,
            session_id,
            info,
            scope,
            rows,
            batch.messages,
            batch.known,
            batch.keys,
        )
        applied = await _apply(
            deps,
            tenant_id,
            session_id,
            scope,
            info.agent_id,
            proposal,
            _range_point(tenant_id, session_id, start, proposal.last_seq),
        )
        outcome.current = None
        outcome.messages += len(rows)
        _count(outcome, proposal, applied)
        start = proposal.last_seq + 1
    return outcome


def stated_range(first: int, last: int, error: str, at: datetime) -> dict[str, Any]:
    return {"first_seq": first, "last_seq": last, "error": error[:300], "at": at.isoformat()}

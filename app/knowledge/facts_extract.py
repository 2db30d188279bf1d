"""Fact extraction: new messages of a session -> two LLM steps -> one transaction.

`run_extraction` loops over batches of the messages after the session's watermark:

1. read (short transaction): the session, its facts config and watermark, and the next
   batch of messages (at most `LOOM_FACTS_INPUT_TOKENS` tokens);
2. ask the LLM, outside any transaction: candidate facts of the batch, then (only when some
   candidate has stored neighbours) a decision per candidate against the closest stored
   facts of the scope (full-text ranking over item text);
3. apply (one transaction): re-read the watermark under a row lock (it must not have moved:
   another run applied this batch -> re-plan), lock the scope and the targeted facts (each
   must still be valid -> else re-plan), write every operation and its version row, and
   advance the watermark to the batch's last seq.

A crash before the commit writes nothing of the batch, and the next run reads it again; a
crash after it never reads it again: no fact is lost or doubled. A model answer that
cannot be applied raises `FactOutputError` before anything is written.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.knowledge import facts_metrics as metrics
from app.knowledge import facts_repository as repo
from app.knowledge import repository as items_repo
from app.knowledge.facts import (
    FACT_KIND,
    NEIGHBOURS,
    FactOutputError,
    FactsConfig,
    Operation,
    Plan,
    check_candidates,
    plan_operations,
)
from app.knowledge.scopes import Scope, agent_scope, parse_scope, user_scope
from app.knowledge.service import enforce_max_items, token_cost
from app.llm import facts_prompts as prompts
from app.llm.client import LLMClient
from app.llm.errors import LLMError
from app.models.memory_item import MemoryItem

log = logging.getLogger("loom.facts")

MAX_BATCHES = 100  # per run; a longer backlog continues in the next run
MAX_STALE_REPLANS = 5
_READ_LIMIT = 500  # messages read per batch at most (the token cap usually ends it first)
_CHARS_PER_TOKEN = 4


class StaleFacts(Exception):
    """The watermark or a targeted fact moved between planning and applying."""


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
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    watermark: int = 0
    skipped: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Deps:
    sessionmaker: async_sessionmaker[AsyncSession]
    llm: LLMClient | None
    settings: Any


def fact_scope(cfg: FactsConfig, agent_id: str, user_id: str | None = None) -> Scope:
    """The scope the session's facts live in (`agent` = the session's agent; `user` = the
    session's user, or the agent's tier for a session without a user)."""
    scope = parse_scope(cfg.scope)
    if scope.kind == "user" and scope.id is None:
        return user_scope(user_id) if user_id else agent_scope(agent_id)
    return agent_scope(agent_id) if scope.kind == "agent" else scope


async def _ask(deps: Deps, outcome: Outcome, step: str, system: str, prompt: str,
               tool: str, description: str, model: type[BaseModel]) -> Any:
    assert deps.llm is not None
    try:
        answer = await deps.llm.structured(
            system, prompt, tool_name=tool, tool_description=description,
            schema=prompts.tool_schema(model), max_tokens=int(deps.settings.facts_max_tokens))
    except LLMError:  # a call that failed still counts (its tokens are unknown)
        outcome.llm_calls += 1
        metrics.LLM_CALLS.labels(step=step).inc()
        raise
    outcome.llm_calls += 1
    outcome.input_tokens += answer.input_tokens
    outcome.output_tokens += answer.output_tokens
    metrics.LLM_CALLS.labels(step=step).inc()
    metrics.LLM_TOKENS.labels(step=step, direction="input").inc(answer.input_tokens)
    metrics.LLM_TOKENS.labels(step=step, direction="output").inc(answer.output_tokens)
    try:
        return model.model_validate(answer.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise FactOutputError(f"{step}: the answer does not match the schema ({where}: "
                              f"{first['msg']})") from None


def _batch(rows: list[repo.BatchRow], cap: int) -> list[repo.BatchRow]:
    out: list[repo.BatchRow] = []
    used = 0
    for r in rows:
        if out and used + r.token_count > cap:
            break
        out.append(r)
        used += r.token_count
    return out


def _shown(rows: list[repo.BatchRow], agent_id: str, cap: int) -> list[prompts.BatchMessage]:
    limit = cap * _CHARS_PER_TOKEN
    return [prompts.BatchMessage(r.seq, prompts.speaker(r.role, r.name, agent_id),
                                 r.created_at, r.text[:limit])
            for r in rows if r.role in ("user", "assistant") and r.text.strip()]


def _dedupe(found: list[prompts.CandidateFact]) -> list[prompts.CandidateFact]:
    """One candidate per text (case and spaces ignored): seqs and tags merged, the
    highest importance kept, placed where it was stated last."""
    by_text: dict[str, prompts.CandidateFact] = {}
    for c in found:
        key = " ".join(c.text.lower().split())
        seen = by_text.pop(key, None)
        if seen is None:
            by_text[key] = c
        else:
            by_text[key] = seen.model_copy(update={
                "importance": max(seen.importance, c.importance),
                "tags": list(dict.fromkeys([*seen.tags, *c.tags])),
                "source_seqs": sorted({*seen.source_seqs, *c.source_seqs})})
    return list(by_text.values())


@dataclasses.dataclass
class Proposal:
    """What one batch would change: candidates, the plan, and when each was stated."""

    last_seq: int
    candidates: list[prompts.CandidateFact]
    dates: list[datetime]
    plan: Plan


async def propose(deps: Deps, outcome: Outcome, tenant_id: uuid.UUID, session_id: uuid.UUID,
                  info: repo.SessionFacts, scope: Scope,
                  rows: list[repo.BatchRow]) -> Proposal:
    """Steps 1 and 2 for one batch (LLM calls; no write)."""
    cap = int(deps.settings.facts_input_tokens)
    shown = _shown(rows, info.agent_id, cap)
    last = rows[-1].seq
    if not shown:
        return Proposal(last, [], [], Plan())
    found = await _ask(deps, outcome, "extract", prompts.EXTRACT_SYSTEM,
                       prompts.render_batch(shown), prompts.EXTRACT_TOOL,
                       prompts.EXTRACT_TOOL_DESCRIPTION, prompts.CandidatesOut)
    check_candidates(found.facts, {r.seq for r in rows})
    candidates = _dedupe(found.facts)
    if not candidates:
        return Proposal(last, [], [], Plan())
    at = {r.seq: r.created_at for r in rows}
    dates = [max(at[s] for s in c.source_seqs) for c in candidates]
    async with deps.sessionmaker() as db:
        near = [await repo.nearest_facts(db, tenant_id, scope, c.text, limit=NEIGHBOURS,
                                         agent_id=info.agent_id) for c in candidates]
        await db.rollback()
    shown_facts = [[prompts.ShownFact(str(r.id), r.text or "", r.valid_from) for r in rs]
                   for rs in near]
    ids = [{f.id for f in fs} for fs in shown_facts]
    if not any(ids):  # nothing stored is close: every candidate is new (no second call)
        plan = Plan(tuple(Operation("add", i) for i in range(len(candidates))))
    else:
        decided = await _ask(deps, outcome, "decide", prompts.DECIDE_SYSTEM,
                             prompts.render_decisions(candidates, shown_facts, dates),
                             prompts.DECIDE_TOOL, prompts.DECIDE_TOOL_DESCRIPTION,
                             prompts.DecisionsOut)
        plan = plan_operations(decided.decisions, len(candidates), ids)
    return Proposal(last, candidates, dates, plan)


def _new_fact(tenant_id: uuid.UUID, session_id: uuid.UUID, scope: Scope,
              cand: prompts.CandidateFact, when: datetime) -> MemoryItem:
    text = cand.text.strip()
    now = datetime.now(UTC)
    return MemoryItem(
        id=uuid.uuid4(), tenant_id=tenant_id, scope_kind=scope.kind,
        scope_id=scope.storage_id, kind=FACT_KIND, source=f"session:{session_id}",
        tags=list(dict.fromkeys(cand.tags)), importance=cand.importance, text=text,
        payload=None, token_cost=token_cost(FACT_KIND, text, None), created_at=now,
        updated_at=now, valid_from=when, source_session_id=session_id,
        source_seqs=sorted(set(cand.source_seqs)), version=1)


async def apply(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID,
                scope: Scope, expected_watermark: int, proposal: Proposal, *,
                max_items: int) -> dict[str, int]:
    """Write one batch's operations and advance the watermark (the caller commits)."""
    await repo.ensure_state(db, tenant_id, session_id)
    state = await repo.get_state(db, tenant_id, session_id, for_update=True)
    assert state is not None
    if state.watermark_seq != expected_watermark:
        raise StaleFacts("the watermark moved")
    ops = proposal.plan.operations
    if ops:
        await items_repo.lock_scope(db, tenant_id, scope)
    targets = await repo.lock_targets(
        db, tenant_id, [uuid.UUID(o.target) for o in ops if o.target is not None])
    for o in ops:
        if o.target is None:
            continue
        t = targets.get(uuid.UUID(o.target))
        if (t is None or t.invalid_at is not None or t.kind != FACT_KIND
                or (t.scope_kind, t.scope_id) != (scope.kind, scope.storage_id)):
            raise StaleFacts(f"fact {o.target} changed meanwhile")
    now = datetime.now(UTC)
    # a stored fact targeted by several candidates: each applies to it as the one before
    # left it (an INVALIDATE hands it on to the fact that replaced it)
    current: dict[uuid.UUID, MemoryItem] = dict(targets)
    for o in ops:
        cand, when = proposal.candidates[o.candidate], proposal.dates[o.candidate]
        if o.op == "update":
            t = current[uuid.UUID(o.target or "")]
            text = (o.text or cand.text).strip()
            t.text, t.token_cost = text, token_cost(FACT_KIND, text, None)
            t.importance = cand.importance
            t.tags = list(dict.fromkeys([*(t.tags or []), *cand.tags]))
            t.source_session_id, t.source_seqs = session_id, sorted(set(cand.source_seqs))
            t.version += 1
            t.updated_at = now
            await db.flush()
            await repo.add_version(db, t, "update", reason=f"restated in msg "
                                   f"{', '.join(map(str, t.source_seqs))}")
            continue
        item = _new_fact(tenant_id, session_id, scope, cand, when)
        db.add(item)
        await db.flush()
        await repo.add_version(db, item, "add")
        if o.op == "invalidate":
            key = uuid.UUID(o.target or "")
            t = current[key]
            current[key] = item
            t.invalid_at, t.superseded_by = max(when, t.valid_from or when), item.id
            t.version += 1
            t.updated_at = now
            await db.flush()
            await repo.add_version(db, t, "invalidate", reason=(
                f"contradicted by msg {', '.join(map(str, item.source_seqs))} "
                f"(fact {item.id})"))
    if scope.kind == "project" and any(o.op != "update" for o in ops):
        await enforce_max_items(db, tenant_id, scope, max_items)
    await repo.advance(db, tenant_id, session_id, proposal.last_seq)
    counts = proposal.plan.counts
    for op, n in counts.items():
        if n and op != "none":
            metrics.OPERATIONS.labels(op=op).inc(n)
    return counts


async def run_extraction(deps: Deps, tenant_id: uuid.UUID, session_id: uuid.UUID, *,
                         force: bool, lease_lost: Callable[[], bool] = lambda: False,
                         outcome: Outcome | None = None) -> Outcome:
    """Extract batch after batch until the messages due are read (see module doc).

    `force` (an explicit extract) reads up to the newest message, whatever their number;
    otherwise (after a compression) only the messages that left L1, and only once at least
    `min_batch` of them are new. `outcome` is filled as it goes (LLM usage counts even
    when a later step fails)."""
    outcome = outcome if outcome is not None else Outcome()
    stale = 0
    cap = int(deps.settings.facts_input_tokens)
    for _ in range(MAX_BATCHES):
        async with deps.sessionmaker() as db:
            info = await repo.session_facts(db, tenant_id, session_id)
            if info is None:
                return outcome
            cfg = FactsConfig.from_stored(info.config.get("facts"))
            outcome.watermark = info.watermark
            if not cfg.enabled:
                outcome.skipped = outcome.skipped or "disabled"
                return outcome
            upto = info.last_seq if force else (info.l1_start_seq or 1) - 1
            due = upto - info.watermark
            if due <= 0:
                return outcome
            if not force and outcome.batches == 0 and due < cfg.min_batch:
                outcome.skipped = "below_min_batch"
                return outcome
            rows = _batch(await repo.messages_after(
                db, tenant_id, session_id, after=info.watermark, upto=upto,
                limit=_READ_LIMIT), cap)
            await db.rollback()
        if not rows:
            return outcome
        scope = fact_scope(cfg, info.agent_id, info.user_id)
        proposal = await propose(deps, outcome, tenant_id, session_id, info, scope, rows)
        if lease_lost():
            raise LeaseLost
        async with deps.sessionmaker() as db:
            try:
                counts = await apply(db, tenant_id, session_id, scope, info.watermark,
                                     proposal,
                                     max_items=int(deps.settings.knowledge_max_items))
                await db.commit()
            except StaleFacts as exc:
                await db.rollback()
                stale += 1
                if stale > MAX_STALE_REPLANS:
                    raise
                log.info("facts of %s moved during extraction (%s); re-planning",
                         session_id, exc)
                continue
        metrics.MESSAGES.inc(len(rows))
        outcome.batches += 1
        outcome.messages += len(rows)
        outcome.watermark = proposal.last_seq
        outcome.added += counts["add"]  # an INVALIDATE adds its successor too
        outcome.updated += counts["update"]
        outcome.invalidated += counts["invalidate"]
        outcome.unchanged += counts["none"]
    return outcome

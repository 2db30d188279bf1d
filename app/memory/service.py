"""Segmented memory: the operations other domains call (compress, promote, usage).

Each runs on an asyncpg connection in the caller's transaction: a route's (`app.auth.deps.DbDep`) or
the compression job's (`app.core.db.transaction`), which commits it.

Concurrency: every writer takes the session's ``memory_states`` row lock and bumps
``version``; ``apply_compression`` also checks that ``version`` is the one its plan was
made from, so a plan made by one process is never applied over another's change.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from app.core.errors import BadRequest
from app.memory import policy, repository
from app.memory.aggregate import Loaded, load, memory_config
from app.memory.errors import OverBudget, StaleMemoryState
from app.memory.heuristic_summariser import SummaryDraft, count_tokens
from app.memory.repository import oldest
from app.models.memory_summary import SummaryRow
from app.models.session import SessionRow

# A compression round reads at most this many of the oldest L1 messages, so working
# through a long uncompressed backlog costs O(backlog), not O(backlog^2).
PLAN_CHUNK = 400


@dataclass(frozen=True)
class CompressionRange:
    """A run of L1 messages to summarise (canonical dicts, oldest first)."""

    start_seq: int
    end_seq: int
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class CompressionPlan:
    """One compression round, valid only while the state is at ``state_version``."""

    session_id: uuid.UUID
    state_version: int
    ranges: list[CompressionRange]
    snapshot_l2: bool
    usage: float
    triggers: tuple[str, ...]
    policy_plan: policy.Plan = field(repr=False)


@dataclass(frozen=True)
class PromoteResult:
    added: list[int]
    promoted: list[int]
    promoted_tokens: int
    usage: float
    skipped: list[dict[str, Any]] = field(default_factory=list)


async def plan_compression(
    conn: asyncpg.Connection, session_row: SessionRow, *, force: bool = False
) -> CompressionPlan | None:
    """Plan one compression round from the current state; None when nothing is due."""
    loaded = await _load(conn, session_row, window=oldest(PLAN_CHUNK))
    p = policy.plan(loaded.layers, loaded.cfg, force=force)
    if p is None:
        return None
    ranges = [
        CompressionRange(r.start_seq, r.end_seq, loaded.messages_for(r.seqs)) for r in p.ranges
    ]
    return CompressionPlan(
        session_id=session_row.id,
        state_version=loaded.state.version,
        ranges=ranges,
        snapshot_l2=p.snapshot_l2,
        usage=p.usage,
        triggers=p.triggers,
        policy_plan=p,
    )


async def apply_compression(
    conn: asyncpg.Connection,
    session_row: SessionRow,
    plan: CompressionPlan,
    drafts: list[SummaryDraft],
) -> None:
    """Write the plan's summaries to L2, move the L1 boundary, snapshot L2 if due.

    Raises ``StaleMemoryState`` when the state moved since the plan (so applying the
    same plan twice writes nothing the second time).
    """
    loaded = await _load(conn, session_row, window=oldest(PLAN_CHUNK), lock=True)
    if loaded.state.version != plan.state_version:
        raise StaleMemoryState("The session's memory changed since this plan was made.")
    by_range = {(d.start_seq, d.end_seq): d for d in drafts}
    rows: list[SummaryRow] = []
    for r in plan.ranges:
        draft = by_range.get((r.start_seq, r.end_seq))
        if draft is None:
            raise BadRequest(
                f"No summary for msg:{r.start_seq}-{r.end_seq}.", code="summary_missing"
            )
        rows.append(
            SummaryRow(
                id=str(uuid.uuid4()),
                start_seq=r.start_seq,
                end_seq=r.end_seq,
                text=draft.text,
                method=draft.method if draft.method in ("llm", "heuristic") else "heuristic",
                token_count=count_tokens(draft.text),
            )
        )
    new_records = [
        policy.SummaryRecord(s.start_seq, s.end_seq, s.token_count, key=s.id) for s in rows
    ]
    try:
        applied = policy.apply_plan(loaded.layers, plan.policy_plan, new_records, loaded.cfg)
    except ValueError as exc:
        raise StaleMemoryState(str(exc)) from exc
    tenant_id, session_id = session_row.tenant_id, session_row.id
    await repository.add_summaries(conn, tenant_id, session_id, rows)
    texts = {s.id: s for s in [*loaded.l2, *rows]}
    for snap in applied.snapshots:
        await repository.archive(conn, tenant_id, session_id, [texts[str(r.key)] for r in snap])
    start: int | None = None
    swapped: int | None = None
    if plan.ranges:
        # the chunk read holds every message before `start` (L1 is gap-free from its start)
        start = plan.ranges[-1].end_seq + 1
        swapped = loaded.state.swapped_tokens + sum(
            m.token_count for m in loaded.l1 if m.seq < start
        )
    await repository.set_compressed(
        conn,
        tenant_id,
        session_id,
        l2_tokens=applied.layers.l2_tokens,
        l1_start_seq=start,
        swapped_tokens=swapped,
    )


async def memory_usage(conn: asyncpg.Connection, session_row: SessionRow) -> float:
    """Stored memory tokens (ROM + Kernel + L2 + promoted + L1) / budget, from the stored
    counters as the append's pressure check reads them (`repository.memory_tokens`)."""
    tokens = await repository.memory_tokens(conn, session_row.tenant_id, session_row.id)
    return 0.0 if tokens is None else tokens / memory_config(session_row).budget


async def promote_messages(
    conn: asyncpg.Connection, session_row: SessionRow, seqs: list[int]
) -> PromoteResult:
    """Copy swap messages into the context (after L2, before L1), whole tool groups.

    Any message the built context does not show verbatim can be promoted: older than L1,
    or in L1 but shown as a stand-in while its compression is pending. Messages that are
    skipped are named with the reason (`shown_verbatim`, `already_promoted`, `not_found`).
    Refused with 409 (``over_budget``) when the context would exceed the budget.
    """
    loaded = await _load(conn, session_row, lock=True)
    state = loaded.state
    projected = _projected_layers(loaded)
    verbatim = {m.seq for m in projected.l1}
    already = set(state.promoted_seqs or [])
    skipped: dict[int, str] = {}
    for s in seqs:
        if not 0 < s <= session_row.last_seq:
            skipped[s] = "not_found"
        elif s in verbatim:
            skipped[s] = "shown_verbatim"
        elif s in already:
            skipped[s] = "already_promoted"
    wanted = sorted(s for s in set(seqs) if s not in skipped)
    rows = await repository.messages_by_seqs(conn, session_row.tenant_id, session_row.id, wanted)
    call_ids = {c["id"] for m in rows for c in (m.tool_calls or [])}
    call_ids |= {m.tool_use_id for m in rows if m.tool_use_id}
    partners = await repository.tool_partners(
        conn, session_row.tenant_id, session_row.id, sorted(call_ids)
    )
    by_seq = {m.seq: m for m in [*rows, *partners] if m.seq not in verbatim}
    added = sorted(s for s in by_seq if s not in already)
    extra = sum(by_seq[s].token_count for s in added)
    base = projected.memory_tokens
    if base + extra > loaded.cfg.budget:
        raise OverBudget(
            f"Promoting {len(added)} messages ({extra} tokens) would make the context "
            f"{base + extra} tokens, over the budget of {loaded.cfg.budget}. Clear promoted "
            "messages or promote fewer.",
            details={"tokens_needed": extra, "tokens_free": max(0, loaded.cfg.budget - base)},
        )
    promoted, promoted_tokens = sorted(already | set(added)), state.promoted_tokens + extra
    if added:
        await repository.set_promoted(
            conn, session_row.tenant_id, session_row.id, promoted, promoted_tokens
        )
    return PromoteResult(
        added=added,
        promoted=promoted,
        promoted_tokens=promoted_tokens,
        usage=(base + extra) / loaded.cfg.budget,
        skipped=[{"seq": s, "reason": r} for s, r in sorted(skipped.items())],
    )


async def clear_promoted(conn: asyncpg.Connection, session_row: SessionRow) -> int:
    """Drop every promoted message from the context; returns how many there were."""
    state = (await _load(conn, session_row, window=oldest(0), lock=True)).state
    if not state.promoted_seqs:
        return 0
    count = len(state.promoted_seqs)
    await repository.set_promoted(conn, session_row.tenant_id, session_row.id, [], 0)
    return count


def _projected_layers(loaded: Loaded) -> policy.Layers:
    """The layers once the pending compression round is shown (stand-ins): what a built
    context shows before any budget fitting."""
    layers = loaded.layers
    pending = policy.plan(layers, loaded.cfg)
    if pending is None:
        return layers
    by_seq = {r.seq: r for r in layers.l1}
    drafts = [
        policy.SummaryRecord(
            r.start_seq, r.end_seq, loaded.stand_in_tokens([by_seq[s] for s in r.seqs])
        )
        for r in pending.ranges
    ]
    return policy.apply_plan(layers, pending, drafts, loaded.cfg).layers


async def _load(
    conn: asyncpg.Connection,
    session_row: SessionRow,
    *,
    window: repository.Window = repository.ALL_L1,
    lock: bool = False,
) -> Loaded:
    """The session's memory, read on the connection of the writer's transaction."""
    return await load(conn, session_row.tenant_id, session_row.id, window=window, lock=lock)


__all__ = [
    "CompressionPlan",
    "CompressionRange",
    "PromoteResult",
    "apply_compression",
    "clear_promoted",
    "memory_usage",
    "plan_compression",
    "promote_messages",
]

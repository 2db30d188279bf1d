"""Fit a session's layers into its budget for one built context. Pure Python, no I/O.

``fit`` first projects the pending compression round (``policy.plan``) using fast
stand-in summaries, so a context shows what the policy wants even before a job has
written it. If the result is still over the budget it degrades, in this order, only
as far as needed (SPEC: a built context is never larger than the budget):

1. drop the oldest L2 summaries from this view (they stay stored);
2. summarise more of L1's unprotected prefix into one stand-in (whole units only);
   if even that stand-in does not fit, the prefix is left out of the view;
3. drop promoted units (oldest first), then provider blocks (last registered first);
4. truncate protected messages, largest first, down to a marker (``truncated`` maps a
   seq to the tokens the renderer may spend on it);
5. drop whole units of the current turn that come after the user message, oldest
   first (they remain in swap).

Nothing is written: the stored state changes only through ``apply_compression``.
ROM and Kernel are never cut; the service keeps them within half the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.memory.policy import (
    BlockRecord,
    Layers,
    MemoryConfig,
    MessageRecord,
    Plan,
    SummaryRecord,
    apply_plan,
    group_units,
    plan,
    protected_start,
    tokens,
)

StandIn = Callable[[Sequence[MessageRecord]], int]


@dataclass
class View:
    """What goes into one built context (records, oldest first) and why."""

    budget: int
    rom_tokens: int
    kernel_tokens: int
    l2: list[SummaryRecord]
    promoted: list[MessageRecord]
    l1: list[MessageRecord]
    blocks: list[BlockRecord]
    overhead_tokens: int = 0
    plan: Plan | None = None
    truncated: dict[int, int] = field(default_factory=dict)
    dropped_l2: list[SummaryRecord] = field(default_factory=list)
    dropped_promoted: list[int] = field(default_factory=list)
    dropped_blocks: list[str] = field(default_factory=list)
    dropped_l1: list[int] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return (
            self.rom_tokens
            + self.kernel_tokens
            + self.overhead_tokens
            + tokens(self.l2)
            + tokens(self.promoted)
            + tokens(self.l1)
            + tokens(self.blocks)
        )

    @property
    def stand_ins(self) -> list[SummaryRecord]:
        return [s for s in self.l2 if s.stand_in]

    @property
    def excess(self) -> int:
        return self.total_tokens - self.budget


def stand_in_for(records: Sequence[MessageRecord], stand_in: StandIn) -> SummaryRecord:
    """A stand-in summary record for a run of messages."""
    return SummaryRecord(
        start_seq=records[0].seq,
        end_seq=records[-1].seq,
        token_count=stand_in(records),
        stand_in=True,
    )


def fit(
    layers: Layers,
    cfg: MemoryConfig,
    stand_in: StandIn,
    *,
    overhead_tokens: int = 0,
) -> View:
    """Return the view of ``layers`` that a context shows, within ``cfg.budget``."""
    pending = plan(layers, cfg)
    projected = layers
    if pending is not None:
        by_seq = {m.seq: m for m in layers.l1}
        drafts = [stand_in_for([by_seq[s] for s in r.seqs], stand_in) for r in pending.ranges]
        projected = apply_plan(layers, pending, drafts, cfg).layers
    l1_seqs = {m.seq for m in projected.l1}
    view = View(
        budget=cfg.budget,
        rom_tokens=layers.rom_tokens,
        kernel_tokens=layers.kernel_tokens,
        l2=list(projected.l2),
        # a message shown verbatim in L1 is never shown twice (e.g. promoted while its
        # compression was pending, then the window grew and the compression was dropped)
        promoted=[m for m in projected.promoted if m.seq not in l1_seqs],
        l1=list(projected.l1),
        blocks=list(projected.blocks),
        overhead_tokens=overhead_tokens,
        plan=pending,
    )
    if pending is not None:
        view.decisions.append(
            f"pending compression ({', '.join(pending.triggers)}): "
            f"{len(pending.ranges)} stand-in summaries"
        )
    for step in (_drop_l2, _summarise_more, _drop_promoted, _drop_blocks, _truncate, _drop_turn):
        if view.excess <= 0:
            break
        step(view, stand_in)
    return view


def _drop_l2(view: View, stand_in: StandIn) -> None:
    while view.excess > 0 and view.l2:
        gone = view.l2.pop(0)
        view.dropped_l2.append(gone)
        view.decisions.append(f"dropped L2 summary msg:{gone.start_seq}-{gone.end_seq} from view")


def _summarise_more(view: View, stand_in: StandIn) -> None:
    units = group_units(view.l1)
    limit = protected_start(units)
    if limit == 0:
        return
    prefix: list[MessageRecord] = []
    for k in range(limit):
        prefix.extend(units[k])
        summary = stand_in_for(prefix, stand_in)
        saved = tokens(prefix) - summary.token_count
        if view.excess - saved <= 0:
            view.l1 = view.l1[len(prefix) :]
            view.l2.append(summary)
            view.decisions.append(
                f"summarised msg:{summary.start_seq}-{summary.end_seq} for this view"
            )
            return
    # Even one summary of the whole unprotected prefix is too big: leave it out.
    view.l1 = view.l1[len(prefix) :]
    view.dropped_l1.extend(m.seq for m in prefix)
    view.decisions.append(
        f"left msg:{prefix[0].seq}-{prefix[-1].seq} out of this view (budget too small)"
    )


def _drop_promoted(view: View, stand_in: StandIn) -> None:
    units = group_units(view.promoted)
    while view.excess > 0 and units:
        unit = units.pop(0)
        seqs = {m.seq for m in unit}
        view.promoted = [m for m in view.promoted if m.seq not in seqs]
        view.dropped_promoted.extend(sorted(seqs))
        view.decisions.append(f"dropped promoted msg:{min(seqs)}-{max(seqs)} from view")


def _drop_blocks(view: View, stand_in: StandIn) -> None:
    while view.excess > 0 and view.blocks:
        gone = view.blocks.pop()
        view.dropped_blocks.append(gone.name)
        view.decisions.append(f"dropped block {gone.name!r} from view")


def _truncate(view: View, stand_in: StandIn) -> None:
    order = sorted(range(len(view.l1)), key=lambda i: -view.l1[i].token_count)
    for i in order:
        if view.excess <= 0:
            return
        msg = view.l1[i]
        cut = min(view.excess, msg.token_count - msg.floor)
        if cut <= 0:
            continue
        allowed = msg.token_count - cut
        view.l1[i] = MessageRecord(
            seq=msg.seq,
            role=msg.role,
            token_count=allowed,
            tool_use_ids=msg.tool_use_ids,
            tool_result_ids=msg.tool_result_ids,
            has_text=msg.has_text,
            is_turn=msg.is_turn,
            min_tokens=msg.min_tokens,
        )
        view.truncated[msg.seq] = allowed
        view.decisions.append(f"truncated msg:{msg.seq} to {allowed} tokens")


def _drop_turn(view: View, stand_in: StandIn) -> None:
    units = group_units(view.l1)
    keep = protected_start(units)
    for idx in range(keep + 1, len(units)):
        if view.excess <= 0:
            return
        seqs = {m.seq for m in units[idx]}
        view.l1 = [m for m in view.l1 if m.seq not in seqs]
        for s in seqs:
            view.truncated.pop(s, None)
        view.dropped_l1.extend(sorted(seqs))
        view.decisions.append(f"left msg:{min(seqs)}-{max(seqs)} of the current turn out")

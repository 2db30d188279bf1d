"""Segmented-memory policy and fit: direct cases and hypothesis properties (SPEC section 3)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.fit import fit
from app.memory.policy import (
    BlockRecord,
    Layers,
    MemoryConfig,
    MessageRecord,
    SummaryRecord,
    apply_plan,
    default_reserve,
    group_units,
    plan,
    promotion_fits,
    protected_start,
)

# Fixed seed and >= 200 examples whatever profile is loaded (SPEC: CI property tests).
CI = settings(max_examples=300, derandomize=True, deadline=None)


def user(seq: int, tokens: int = 10) -> MessageRecord:
    return MessageRecord(seq=seq, role="user", token_count=tokens)


def assistant(seq: int, tokens: int = 10, calls: tuple[str, ...] = ()) -> MessageRecord:
    return MessageRecord(seq=seq, role="assistant", token_count=tokens, tool_use_ids=calls)


def tool(seq: int, ids: tuple[str, ...], tokens: int = 10) -> MessageRecord:
    return MessageRecord(
        seq=seq, role="tool", token_count=tokens, tool_result_ids=ids, has_text=False
    )


def summary_tokens(records: Sequence[MessageRecord]) -> int:
    """A deterministic stand-in size: small but not free, grows slowly with the range."""
    return 12 + 2 * len(records)


def summaries_for(layers: Layers, p) -> list[SummaryRecord]:
    by_seq = {m.seq: m for m in layers.l1}
    return [
        SummaryRecord(r.start_seq, r.end_seq, summary_tokens([by_seq[s] for s in r.seqs]))
        for r in p.ranges
    ]


# --- direct cases -----------------------------------------------------------


def test_budget_and_scaled_defaults() -> None:
    assert MemoryConfig().budget == 180_000
    assert MemoryConfig().l2_cap == 5_000
    assert default_reserve(2_000) == 200
    small = MemoryConfig(max_context_tokens=2_000)
    assert small.reserve == 200 and small.budget == 1_800 and small.l2_cap == 450
    assert MemoryConfig(max_context_tokens=2_000, reserved_output_tokens=500).budget == 1_500
    assert MemoryConfig(max_context_tokens=250).problems()


@pytest.mark.parametrize(
    "used,expected",
    [(0.69, 0), (0.70, 4), (0.79, 4), (0.80, 6), (0.849, 6), (0.85, 8), (0.99, 8)],
)
def test_thresholds_pick_4_6_8(used: float, expected: int) -> None:
    cfg = MemoryConfig(max_context_tokens=10_000, reserved_output_tokens=0, l1_max_messages=50)
    l1 = tuple(user(i) if i % 2 else assistant(i) for i in range(1, 21))
    rom = int(used * cfg.budget) - 200
    p = plan(Layers(rom_tokens=rom, l1=l1), cfg)
    assert (len(p.seqs) if p else 0) == expected


def test_parallel_tool_group_is_taken_whole() -> None:
    cfg = MemoryConfig(max_context_tokens=1_000, reserved_output_tokens=0, l1_max_messages=50)
    l1 = (
        user(1),
        assistant(2),
        user(3),
        assistant(4, calls=("a", "b", "c")),
        tool(5, ("a",)),
        tool(6, ("b",)),
        tool(7, ("c",)),
        assistant(8),
        user(9),
    )
    p = plan(Layers(rom_tokens=650, l1=l1), cfg)  # usage 0.74 -> 4 messages wanted
    assert p is not None
    assert p.seqs == (1, 2, 3, 4, 5, 6, 7)  # 4 would split the group: take it all


def test_overflow_evicts_whole_exchanges_fifo() -> None:
    cfg = MemoryConfig(l1_max_messages=4)
    l1 = (user(1), assistant(2), assistant(3), user(4), assistant(5), user(6))
    p = plan(Layers(l1=l1), cfg)
    assert p is not None and p.seqs == (1, 2, 3) and p.triggers == ("l1_overflow",)


def test_turn_being_answered_is_never_compressed() -> None:
    cfg = MemoryConfig(max_context_tokens=1_000, reserved_output_tokens=0, l1_max_messages=2)
    l1 = (
        user(1),
        assistant(2, calls=("x",)),
        tool(3, ("x",)),
        assistant(4, calls=("y",)),
        tool(5, ("y",)),
    )
    p = plan(Layers(rom_tokens=900, l1=l1), cfg, force=True)
    assert p is None  # the whole of L1 is the current turn
    assert protected_start(group_units(l1)) == 0


def test_anthropic_style_results_in_one_message() -> None:
    both = MessageRecord(
        seq=3, role="user", token_count=5, tool_result_ids=("a", "b"), has_text=False
    )
    units = group_units([user(1), assistant(2, calls=("a", "b")), both, assistant(4)])
    assert [tuple(m.seq for m in u) for u in units] == [(1,), (2, 3), (4,)]


def test_abandoned_tool_use_closes_its_unit() -> None:
    units = group_units([user(1), assistant(2, calls=("a",)), user(3), assistant(4)])
    assert [tuple(m.seq for m in u) for u in units] == [(1,), (2,), (3,), (4,)]


def test_apply_snapshots_l2_before_it_overflows() -> None:
    cfg = MemoryConfig(l1_max_messages=2, max_l2_tokens=100)
    old = (SummaryRecord(1, 4, 60), SummaryRecord(5, 8, 30))
    layers = Layers(l2=old, l1=(user(9), assistant(10), user(11), assistant(12)))
    p = plan(layers, cfg)
    assert p is not None and not p.snapshot_l2
    applied = apply_plan(layers, p, [SummaryRecord(9, 10, 20)], cfg)
    assert applied.snapshots == (old,)
    assert applied.layers.l2 == (SummaryRecord(9, 10, 20),)
    assert [m.seq for m in applied.layers.l1] == [11, 12]


def test_apply_rejects_a_stale_plan() -> None:
    cfg = MemoryConfig(l1_max_messages=1)
    layers = Layers(l1=(user(1), assistant(2), user(3)))
    p = plan(layers, cfg)
    assert p is not None
    moved = Layers(l1=layers.l1[2:])
    with pytest.raises(ValueError):
        apply_plan(moved, p, summaries_for(layers, p), cfg)


def test_promotion_budget_check() -> None:
    cfg = MemoryConfig(max_context_tokens=1_000, reserved_output_tokens=100)
    layers = Layers(rom_tokens=800)
    assert promotion_fits(layers, cfg, 100)
    assert not promotion_fits(layers, cfg, 101)


def test_fit_truncates_the_turn_only_as_last_resort() -> None:
    cfg = MemoryConfig(max_context_tokens=1_000, reserved_output_tokens=100)
    layers = Layers(
        rom_tokens=400,
        l2=(SummaryRecord(1, 2, 50),),
        l1=(user(3, 2_000),),
        blocks=(BlockRecord("knowledge", 40),),
    )
    view = fit(layers, cfg, summary_tokens)
    assert view.total_tokens <= cfg.budget
    assert view.l2 == [] and view.blocks == [] and view.truncated == {3: 500}


def test_fit_leaves_a_fitting_context_alone() -> None:
    cfg = MemoryConfig(max_context_tokens=10_000)
    layers = Layers(rom_tokens=100, l2=(SummaryRecord(1, 2, 50),), l1=(user(3), assistant(4)))
    view = fit(layers, cfg, summary_tokens)
    assert view.plan is None and view.decisions == [] and view.total_tokens == 170


# --- random conversations ---------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn, max_turns: int = 14) -> list[MessageRecord]:
    """Turns of: a user message, tool rounds (parallel calls, either result shape,
    sometimes abandoned) and a final assistant reply; random token sizes."""
    out: list[MessageRecord] = []
    size = st.integers(min_value=1, max_value=300)
    call_id = 0
    for _ in range(draw(st.integers(min_value=1, max_value=max_turns))):
        out.append(MessageRecord(len(out) + 1, "user", draw(size)))
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            n = draw(st.integers(min_value=1, max_value=4))
            ids = tuple(f"t{call_id + k}" for k in range(n))
            call_id += n
            out.append(MessageRecord(len(out) + 1, "assistant", draw(size), tool_use_ids=ids))
            shape = draw(st.sampled_from(["separate", "combined", "abandoned"]))
            if shape == "separate":
                for tid in ids:
                    out.append(
                        MessageRecord(
                            len(out) + 1, "tool", draw(size), tool_result_ids=(tid,), has_text=False
                        )
                    )
            elif shape == "combined":
                out.append(
                    MessageRecord(
                        len(out) + 1, "user", draw(size), tool_result_ids=ids, has_text=False
                    )
                )
            else:
                break
        if draw(st.booleans()):
            out.append(MessageRecord(len(out) + 1, "assistant", draw(size)))
    return out


@st.composite
def configs(draw: st.DrawFn) -> MemoryConfig:
    window = draw(st.integers(min_value=600, max_value=6_000))
    reserve = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=window // 10)))
    return MemoryConfig(
        max_context_tokens=window,
        reserved_output_tokens=reserve,
        l1_max_messages=draw(st.integers(min_value=1, max_value=12)),
        max_l2_tokens=draw(st.one_of(st.none(), st.integers(min_value=30, max_value=2_000))),
        max_range_messages=draw(st.integers(min_value=1, max_value=20)),
    )


def tool_pairs(history: Sequence[MessageRecord]) -> list[tuple[int, int]]:
    """(tool_use seq, tool_result seq) for every answered call: an oracle that does not
    use ``group_units``."""
    used_in = {tid: m.seq for m in history for tid in m.tool_use_ids}
    return [(used_in[tid], m.seq) for m in history for tid in m.tool_result_ids if tid in used_in]


def newest_user_text(history: Sequence[MessageRecord]) -> int | None:
    texts = [m.seq for m in history if m.role == "user" and (m.has_text or not m.tool_result_ids)]
    return texts[-1] if texts else None


def pairs_intact(history: Sequence[MessageRecord], present: set[int]) -> bool:
    return all((u in present) == (r in present) for u, r in tool_pairs(history))


def check_state(
    layers: Layers, history: list[MessageRecord], archived: list[SummaryRecord], cfg: MemoryConfig
) -> None:
    l1 = [m.seq for m in layers.l1]
    summarised = archived + list(layers.l2)
    # Every message is either in L1 or covered by exactly one summary, in order.
    covered = [s for r in summarised for s in range(r.start_seq, r.end_seq + 1)]
    assert covered + l1 == [m.seq for m in history]
    # L1 is newer than everything L2 summarises.
    assert all(s.end_seq < min(l1, default=10**9) for s in layers.l2)

    # No tool call is split from its result between L1 and a summary, nor across two
    # summaries (parallel calls: every result shares its call's home).
    def home(seq: int) -> int:
        return next((i for i, r in enumerate(summarised) if r.start_seq <= seq <= r.end_seq), -1)

    for use, result in tool_pairs(history):
        assert home(use) == home(result)
    # The turn being answered is still verbatim in L1.
    turn = newest_user_text(history)
    if turn is not None:
        assert turn in l1
    assert layers.l2_tokens <= cfg.l2_cap


def compress_until_quiet(
    layers: Layers, cfg: MemoryConfig, history: list[MessageRecord], archived: list[SummaryRecord]
) -> Layers:
    for _ in range(len(history) + 2):
        p = plan(layers, cfg)
        if p is None:
            return layers
        before = {m.seq for m in layers.l1}
        applied = apply_plan(layers, p, summaries_for(layers, p), cfg)
        for snap in applied.snapshots:
            archived.extend(snap)
        # ranges are a prefix of L1 made of whole units
        assert set(p.seqs) <= before
        layers = applied.layers
        check_state(layers, history, archived, cfg)
    raise AssertionError("compression did not converge")


@CI
@given(conv=conversations(), cfg=configs(), data=st.data())
def test_appending_and_compressing_keeps_every_invariant(
    conv: list[MessageRecord], cfg: MemoryConfig, data: st.DataObject
) -> None:
    rom = data.draw(st.integers(min_value=0, max_value=cfg.budget // 4))
    layers = Layers(rom_tokens=rom, kernel_tokens=data.draw(st.integers(0, cfg.budget // 4)))
    archived: list[SummaryRecord] = []
    i = 0
    while i < len(conv):
        batch = data.draw(st.integers(min_value=1, max_value=5))
        layers = Layers(
            rom_tokens=layers.rom_tokens,
            kernel_tokens=layers.kernel_tokens,
            l2=layers.l2,
            l1=layers.l1 + tuple(conv[i : i + batch]),
        )
        i += batch
        history = conv[:i]
        layers = compress_until_quiet(layers, cfg, history, archived)
        units = group_units(layers.l1)
        start = protected_start(units)
        # Quiet means: L1 within its cap and usage below 70%, unless only the protected
        # turn is left in L1.
        if start > 0:
            assert len(layers.l1) <= cfg.l1_max_messages
            assert layers.memory_tokens / cfg.budget < min(t for t, _ in cfg.thresholds)


@st.composite
def fitted_inputs(draw: st.DrawFn):
    conv = draw(conversations(max_turns=10))
    cfg = draw(configs())
    cut = draw(st.integers(min_value=0, max_value=len(conv) - 1))
    # Start L1 at a unit boundary; pretend everything before is summarised in L2.
    starts = [u[0].seq for u in group_units(conv)]
    first = max(s for s in starts if s <= cut + 1)
    l1 = tuple(m for m in conv if m.seq >= first)
    l2: list[SummaryRecord] = []
    seq = 1
    while seq < first:
        end = min(first - 1, seq + draw(st.integers(0, 5)))
        l2.append(SummaryRecord(seq, end, draw(st.integers(5, 200))))
        seq = end + 1
    half = cfg.budget // 2
    rom = draw(st.integers(min_value=0, max_value=half))
    kernel = draw(st.integers(min_value=0, max_value=half - rom))
    promoted = tuple(
        MessageRecord(-k, "user", draw(st.integers(1, 200)))
        for k in range(draw(st.integers(0, 3)), 0, -1)
    )
    blocks = tuple(
        BlockRecord(f"b{k}", draw(st.integers(1, 300))) for k in range(draw(st.integers(0, 2)))
    )
    layers = Layers(
        rom_tokens=rom, kernel_tokens=kernel, l2=tuple(l2), promoted=promoted, l1=l1, blocks=blocks
    )
    return layers, cfg


@CI
@given(inputs=fitted_inputs())
def test_fit_never_exceeds_the_budget_and_keeps_structure(inputs) -> None:
    layers, cfg = inputs
    view = fit(layers, cfg, summary_tokens)
    assert view.total_tokens <= cfg.budget
    # L1 in the view is a suffix of L1, whole units only, newer than every L2 entry.
    assert pairs_intact(layers.l1, {m.seq for m in view.l1})
    assert pairs_intact(layers.promoted, {m.seq for m in view.promoted})
    kept = [m.seq for m in view.l1]
    turn = newest_user_text(layers.l1)
    if kept:
        # a suffix of L1, except whole units of the current turn left out as a last resort
        gaps = {m.seq for m in layers.l1 if m.seq >= kept[0]} - set(kept)
        assert gaps <= set(view.dropped_l1)
        assert all(turn is not None and g > turn for g in gaps)
    assert all(s.end_seq < view.l1[0].seq for s in view.l2) if view.l1 else True
    # The turn being answered is in the view.
    if turn is not None:
        assert turn in {m.seq for m in view.l1}
    # L1 within cap unless only the protected turn is left.
    if protected_start(group_units(view.l1)) > 0:
        assert len(view.l1) <= cfg.l1_max_messages
    # Stand-ins cover contiguous seqs right before the view's L1.
    for s in view.stand_ins:
        assert s.start_seq <= s.end_seq
    # Truncation is the last resort: only after everything droppable is gone.
    if view.truncated:
        assert not view.l2 and not view.promoted and not view.blocks
        assert protected_start(group_units(view.l1)) == 0
        assert all(m.token_count >= m.floor for m in view.l1)
    # Nothing degrades when the projected context already fits.
    if not view.decisions or all(d.startswith("pending") for d in view.decisions):
        assert not view.truncated and not view.dropped_l2 and not view.dropped_l1

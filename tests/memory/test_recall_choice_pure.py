"""Automatic recall's choice (app/memory/recall_choice.py), pure: budget, groups, what is shown."""

from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.policy import MessageRecord
from app.memory.recall_choice import RecallConfig, RecallHit, choose, group_of, neighbourhood, tail


def rec(seq, tokens=10, calls=(), results=(), role="assistant"):
    return MessageRecord(
        seq=seq,
        role="tool" if results else role,
        token_count=tokens,
        tool_use_ids=tuple(calls),
        tool_result_ids=tuple(results),
    )


def no_note(_seqs):
    return 0


def test_a_hit_brings_its_whole_tool_group():
    records = [
        rec(1),
        rec(2, calls=("a", "b")),
        rec(3, results=("a",)),
        rec(4, results=("b",)),
        rec(5),
    ]
    chosen = choose([RecallHit(4, 2.0)], records, set(), 100, 10, no_note)
    assert chosen.seqs == (2, 3, 4) and chosen.scores == {4: 2.0}
    assert chosen.message_tokens == 30


def test_an_incomplete_group_is_skipped():
    # the call's second result is not among the loaded records
    records = [rec(2, calls=("a", "b")), rec(3, results=("a",))]
    assert group_of(3, records) is None
    assert choose([RecallHit(3, 1.0)], records, set(), 100, 10, no_note).seqs == ()
    # a result whose call was not loaded
    assert group_of(3, [rec(3, results=("a",)), rec(4)]) is None


def test_shown_messages_and_groups_touching_them_are_not_recalled():
    records = [rec(1), rec(2, calls=("a",)), rec(3, results=("a",)), rec(4)]
    chosen = choose(
        [RecallHit(1, 3.0), RecallHit(3, 2.0), RecallHit(4, 1.0)], records, {1, 2}, 100, 10, no_note
    )
    assert chosen.seqs == (4,)


def test_a_hit_that_does_not_fit_is_skipped_and_later_ones_tried():
    records = [rec(1, tokens=80), rec(2, tokens=15), rec(3, tokens=15)]
    hits = [RecallHit(1, 3.0), RecallHit(2, 2.0), RecallHit(3, 1.0)]
    assert choose(hits, records, set(), 40, 10, lambda seqs: 5).seqs == (2, 3)
    assert choose(hits, records, set(), 30, 10, lambda seqs: 5).seqs == (2,)
    assert choose(hits, records, set(), 100, 1, no_note).seqs == (1,)


def test_config_tokens_are_its_share_within_what_is_free():
    cfg = RecallConfig(enabled=True, share=0.1)
    assert cfg.tokens(10_000, 5_000) == 1_000
    assert cfg.tokens(10_000, 300) == 300
    assert cfg.tokens(10_000, -5) == 0
    assert RecallConfig().tokens(10_000, 5_000) == 0  # off by default
    assert RecallConfig.from_stored(None).enabled is False
    assert RecallConfig.from_stored({"share": 0.2}).enabled is True


def test_neighbourhood_covers_the_reach_without_seq_zero():
    assert neighbourhood([RecallHit(2, 1.0)])[0] == 1
    assert set(range(12, 29)) <= set(neighbourhood([RecallHit(20, 1.0)]))


@st.composite
def conversations(draw):
    """Records in seq order with tool groups (a call, then its results in some order)."""
    records, seq, n_calls = [], 1, 0
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            k = draw(st.integers(1, 3))
            ids = [f"c{n_calls + i}" for i in range(k)]
            n_calls += k
            records.append(rec(seq, draw(st.integers(1, 50)), calls=ids))
            seq += 1
            for i in draw(st.permutations(ids)):
                records.append(rec(seq, draw(st.integers(1, 50)), results=(i,)))
                seq += 1
        else:
            records.append(rec(seq, draw(st.integers(1, 50))))
            seq += 1
    return records


@settings(max_examples=300, derandomize=True)
@given(conversations(), st.data())
def test_choice_invariants(records, data):
    seqs = [r.seq for r in records]
    hit_seqs = data.draw(st.lists(st.sampled_from(seqs), unique=True) if seqs else st.just([]))
    hits = [RecallHit(s, float(len(hit_seqs) - i)) for i, s in enumerate(hit_seqs)]
    shown = set(data.draw(st.lists(st.sampled_from(seqs)) if seqs else st.just([])))
    tokens = data.draw(st.integers(0, 300))
    max_messages = data.draw(st.integers(1, 8))
    chosen = choose(hits, records, shown, tokens, max_messages, lambda s: 3 + 2 * len(s))
    by_seq = {r.seq: r for r in records}
    picked = [by_seq[s] for s in chosen.seqs]
    assert list(chosen.seqs) == sorted(set(chosen.seqs))
    assert not set(chosen.seqs) & shown
    assert len(picked) <= max_messages
    if picked:
        assert sum(r.token_count for r in picked) + 3 + 2 * len(picked) <= tokens
    # every call has all its results, every result its call
    calls = {i for r in picked for i in r.tool_use_ids}
    results = {i for r in picked for i in r.tool_result_ids}
    assert calls == results
    assert set(chosen.scores or {}) <= set(chosen.seqs)


@settings(max_examples=200, derandomize=True)
@given(st.lists(st.integers(1, 2**63 - 1), max_size=50, unique=True))
def test_the_note_bound_is_never_below_the_note(seqs):
    from app.context.builder import recall_note, recall_note_bound
    from app.core.tokens import count_text

    seqs = sorted(seqs)
    assert count_text(recall_note(seqs)) <= recall_note_bound(seqs)


def test_the_adaptive_default_keeps_strong_hits_past_the_base_share():
    cfg = RecallConfig(enabled=True)
    assert cfg.adaptive and cfg.message_cap == 50 and cfg.tokens(10_000, 9_000) == 5_000
    assert cfg.keep(10_000, 9_000) == (1_000, 0.3)
    assert RecallConfig(enabled=True, share=0.2).keep(10_000, 9_000) is None
    assert RecallConfig(enabled=True, share=0.2).message_cap == 10
    records = [rec(s, tokens=10) for s in range(1, 7)]
    hits = [RecallHit(1, 10.0), RecallHit(2, 9.0), RecallHit(3, 2.0), RecallHit(4, 5.0)]
    # the first 25 tokens take any hit; past them only hits scoring >= 30% of the best
    assert choose(hits, records, set(), 100, 50, no_note, keep=(25, 0.3)).seqs == (1, 2, 4)
    assert choose(hits, records, set(), 100, 50, no_note).seqs == (1, 2, 3, 4)


def test_the_tail_fills_what_is_left_with_the_turns_just_before_l1():
    chosen = choose([RecallHit(2, 1.0)], [rec(2)], set(), 100, 50, no_note)
    before_l1 = [rec(7), rec(8, calls=("a",)), rec(9, results=("a",)), rec(10)]
    grown = tail(chosen, before_l1, set(), 45, 50, no_note)
    assert grown.seqs == (2, 8, 9, 10) and grown.message_tokens == 40
    assert grown.scores == {2: 1.0}
    # a message shown already (promoted) or an incomplete group ends the tail
    assert tail(chosen, before_l1, {9}, 100, 50, no_note).seqs == (2, 10)
    assert tail(chosen, before_l1[:2], set(), 100, 50, no_note).seqs == (2,)
    # hits are passed over, the message cap holds
    chosen = choose([RecallHit(10, 1.0)], before_l1, set(), 100, 50, no_note)
    assert tail(chosen, before_l1, set(), 100, 3, no_note).seqs == (8, 9, 10)

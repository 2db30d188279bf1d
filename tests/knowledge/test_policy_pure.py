"""Pure knowledge policy: scopes, eviction, budget split, assembly (with hypothesis)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.knowledge.assembler import Candidate, assemble, priority_order
from app.knowledge.budget import TIERS, BudgetError, TierShares, allocate
from app.knowledge.eviction import EvictionCandidate, eviction_count, select_evictions
from app.knowledge.learned import LearnedError, next_version, rollback_target
from app.knowledge.scopes import GLOBAL, Scope, ScopeError, parse_scope, promotion_target

T0 = datetime(2026, 1, 1, tzinfo=UTC)


# --- scopes ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text,kind,ident",
    [
        ("task/t1", "task", "t1"),
        ("project/my-proj.v2", "project", "my-proj.v2"),
        ("global", "global", None),
    ],
)
def test_parse_scope_valid(text: str, kind: str, ident: str | None) -> None:
    s = parse_scope(text)
    assert (s.kind, s.id) == (kind, ident)
    assert str(s) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "task",
        "task/",
        "project/a/b",
        "global/x",
        "team/x",
        "task/ bad",
        5,
        None,
        "project/" + "x" * 129,
    ],
)
def test_parse_scope_invalid(text: object) -> None:
    with pytest.raises(ScopeError):
        parse_scope(text)


def test_promotion_target_walks_up_one_tier() -> None:
    assert promotion_target(Scope("task", "t"), project_id="p") == Scope("project", "p")
    assert promotion_target(Scope("project", "p")) == GLOBAL
    with pytest.raises(ScopeError):
        promotion_target(Scope("task", "t"))
    with pytest.raises(ScopeError):
        promotion_target(GLOBAL)


# --- eviction -------------------------------------------------------------


def test_eviction_count_seed_numbers() -> None:
    assert eviction_count(1000) == 0
    assert eviction_count(1001) == 100
    assert eviction_count(6, max_items=5) == 1  # 10% rounds to 0: still back to the cap


candidates = st.lists(
    st.builds(
        EvictionCandidate,
        id=st.uuids(),
        importance=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
        created_at=st.integers(0, 50).map(lambda m: T0 + timedelta(minutes=m)),
    ),
    max_size=60,
    unique_by=lambda c: c.id,
)


@given(candidates, st.integers(0, 60))
def test_eviction_takes_lowest_importance_oldest_and_restores_cap(
    items: list[EvictionCandidate], cap: int
) -> None:
    evicted = set(select_evictions(items, max_items=cap))
    kept = [c for c in items if c.id not in evicted]
    assert len(kept) <= max(cap, 0) or not items
    if len(items) <= cap:
        assert not evicted
    # every evicted item sorts before every kept one
    for e in (c for c in items if c.id in evicted):
        for k in kept:
            assert (e.importance, e.created_at, str(e.id)) < (k.importance, k.created_at, str(k.id))


# --- budget ---------------------------------------------------------------


def test_default_split_is_40_40_20() -> None:
    assert allocate(1000) == {"task": 400, "project": 400, "global": 200}


@pytest.mark.parametrize(
    "kw", [{"task": 0.6, "project": 0.6}, {"global_": -0.1}, {"task": 1.5}, {"task": True}]
)
def test_invalid_shares(kw: dict) -> None:
    with pytest.raises(BudgetError):
        TierShares(**kw)


shares_st = (
    st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
    .filter(lambda t: sum(t) <= 1)
    .map(lambda t: TierShares(*t))
)


@given(st.integers(0, 10**7), shares_st)
def test_allocation_never_exceeds_budget_or_share(budget: int, shares: TierShares) -> None:
    out = allocate(budget, shares)
    assert sum(out.values()) <= budget
    for t in TIERS:
        assert 0 <= out[t] <= budget * shares.of(t) + 1e-6


# --- assembly -------------------------------------------------------------

cand_st = st.builds(
    Candidate,
    id=st.uuids(),
    tier=st.sampled_from(TIERS),
    importance=st.floats(0, 1),
    created_at=st.integers(0, 10**6).map(lambda s: T0 + timedelta(seconds=s)),
    token_cost=st.integers(0, 400),
)


@settings(max_examples=300)
@given(
    st.lists(cand_st, max_size=80, unique_by=lambda c: c.id),
    st.integers(0, 5000),
    shares_st,
    st.none() | st.integers(0, 5),
)
def test_package_never_exceeds_budget_or_tier_share(items, budget, shares, head_tail) -> None:
    pkg = assemble(items, budget, shares, head_tail=head_tail)
    assert pkg.used_tokens <= budget
    for t in TIERS:
        used = sum(c.token_cost for c in pkg.items if c.tier == t)
        assert (
            used
            == pkg.tiers[t].used_tokens
            <= pkg.tiers[t].allowance
            <= budget * shares.of(t) + 1e-6
        )
    total = sum(c.token_cost for c in items)
    assert pkg.compression_ratio == (1.0 if total == 0 else pkg.used_tokens / total)
    assert 0.0 <= pkg.compression_ratio <= 1.0
    assert len({c.id for c in pkg.items}) == len(pkg.items)


@given(st.lists(cand_st, max_size=40, unique_by=lambda c: c.id), st.integers(0, 3000))
def test_without_head_tail_a_skipped_item_never_outranks_an_included_that_it_could_replace(
    items, budget
) -> None:
    # Greedy by rank: if an item was left out, it did not fit at its turn, so it must
    # cost more than the allowance minus what higher-ranked included items used.
    pkg = assemble(items, budget)
    chosen = {c.id for c in pkg.items}
    for t in TIERS:
        used = 0
        for c in priority_order([c for c in items if c.tier == t]):
            if c.id in chosen:
                used += c.token_cost
            else:
                assert used + c.token_cost > pkg.tiers[t].allowance


def test_head_tail_keeps_oldest_and_newest_first() -> None:
    items = [
        Candidate(
            i,
            "project",
            importance=1.0 if 2 <= i <= 7 else 0.0,
            created_at=T0 + timedelta(minutes=i),
            token_cost=10,
        )
        for i in range(10)
    ]
    # Allowance of 40 tokens = 4 items: with head_tail=1 the oldest (0) and newest (9)
    # are kept although their importance is 0.
    pkg = assemble(items, 100, TierShares(0, 0.4, 0), head_tail=1)
    ids = [c.id for c in pkg.items]
    assert ids[0] == 0 and ids[-1] == 9 and len(ids) == 4
    plain = assemble(items, 100, TierShares(0, 0.4, 0))
    assert {c.id for c in plain.items} <= set(range(2, 8))


def test_ranked_by_importance_within_share() -> None:
    items = [
        Candidate(uuid.uuid4(), "task", importance=i / 10, created_at=T0, token_cost=10)
        for i in range(10)
    ]
    pkg = assemble(items, 50, TierShares(1, 0, 0))
    assert [c.importance for c in pkg.items] == [0.9, 0.8, 0.7, 0.6, 0.5]
    assert pkg.compression_ratio == 0.5


# --- learned --------------------------------------------------------------


def test_learned_versions_and_rollback() -> None:
    assert next_version(None) == 1 and next_version(3) == 4
    assert rollback_target([1, 2, 3], 3) == 2
    assert rollback_target([1, 2, 3], 3, 1) == 1
    for bad in (3, 4):
        with pytest.raises(LearnedError):
            rollback_target([1, 2, 3], 3, bad)
    with pytest.raises(LearnedError):
        rollback_target([1], 1)

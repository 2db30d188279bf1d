"""The pure time rules of facts (issue 27): time order, older statements, provenance,
event times, the version in effect at a time, and which stored facts a prompt shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.knowledge.timeline import (
    choose_shown,
    merge_sources,
    older_than_target,
    parse_event_time,
    time_order,
    version_at,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def day(n: int) -> datetime:
    return T0 + timedelta(days=n)


def V(version: int, change: str, start: int | None, text: str = "") -> SimpleNamespace:
    return SimpleNamespace(
        version=version, change=change, valid_from=None if start is None else day(start), text=text
    )


def test_time_order_sorts_by_validity_then_statement_then_seq() -> None:
    keys = [(day(5), day(5), 3), (day(1), day(9), 7), (day(5), day(5), 1)]
    assert time_order(keys) == [1, 2, 0]


def test_an_older_candidate_never_overrides() -> None:
    assert older_than_target(day(1), day(2))
    assert not older_than_target(day(2), day(2)) and not older_than_target(day(3), None)


def test_provenance_accumulates_per_session() -> None:
    a = [{"session_id": "s1", "seqs": [3, 1]}]
    b = [{"session_id": "s2", "seqs": [9]}, {"session_id": "s1", "seqs": [1, 5]}]
    assert merge_sources(a, b) == [
        {"session_id": "s1", "seqs": [1, 3, 5]},
        {"session_id": "s2", "seqs": [9]},
    ]


def test_event_time_is_a_date_or_date_time() -> None:
    said = day(40)
    assert parse_event_time(None, said) is None
    assert parse_event_time("2026-02-01", said) == datetime(2026, 2, 1, tzinfo=UTC)
    assert parse_event_time("2026-02-01T10:30", said) == datetime(2026, 2, 1, 10, 30, tzinfo=UTC)
    offset = parse_event_time("2026-02-01T10:30:00+02:00", said)
    assert offset is not None and offset.utcoffset() == timedelta(hours=2)
    with pytest.raises(ValueError):
        parse_event_time("2026-13-01", said)


def text_at(versions: Any, when: datetime, **kw: Any) -> str:
    found = version_at(versions, when, **kw)
    assert found is not None
    return str(found.text)


def test_the_version_in_effect() -> None:
    teacher = [
        V(1, "add", 10, "teacher"),
        V(2, "update", 60, "maths teacher"),
        V(3, "invalidate", 60, "maths teacher"),
    ]
    assert version_at(teacher, day(5)) is None
    assert text_at(teacher, day(30)) == "teacher"
    assert text_at(teacher, day(61)) == "maths teacher"
    # a correction that moves validity earlier rewrites that part of the past
    corrected = [*teacher, V(4, "edit", 0, "physics teacher")]
    assert text_at(corrected, day(30)) == "physics teacher"
    # an item without validity took effect when it was created
    assert text_at([V(1, "add", None, "x")], day(3), created_at=day(2)) == "x"


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "update", "edit", "invalidate", "forget", "confirm"]),
            st.integers(0, 50),
        ),
        min_size=1,
        max_size=8,
    ),
    st.integers(-5, 60),
)
def test_version_at_picks_a_content_version_that_had_begun(
    changes: list[tuple[str, int]], at: int
) -> None:
    versions = [V(i + 1, c, s, f"v{i + 1}") for i, (c, s) in enumerate(changes)]
    found = version_at(versions, day(at))
    if found is not None:
        assert found.valid_from <= day(at)
        assert found.change in {"add", "update", "edit"} or found is versions[0]
        # no later content version took effect between it and `at`
        later = [
            v
            for v in versions
            if v.version > found.version
            and v.change in {"add", "update", "edit"}
            and found.valid_from <= v.valid_from <= day(at)
        ]
        assert not later


def test_choose_shown_all_when_they_fit_else_key_then_text() -> None:
    ids = [f"f{i}" for i in range(10)]
    tokens = {i: 10 for i in ids}
    assert choose_shown(ids, tokens, 100, [], []) == ids
    chosen = choose_shown(ids, tokens, 30, ["f9"], [["f3", "f4", "f5"], ["f7"]])
    assert chosen == ["f9", "f3", "f7"]  # most related first
    # issue 37: same key, related attributes, words, same subject, then the rest: to budget
    chosen = choose_shown(ids, tokens, 60, ["f9"], [["f3"]], related=["f5"], subject=["f1"])
    assert chosen == ["f9", "f5", "f3", "f1", "f0", "f2"]
    # a same-key fact is shown even past the budget
    assert choose_shown(ids, tokens, 5, ["f2"], [["f1"]]) == ["f2"]


@given(
    st.lists(st.integers(1, 30), min_size=1, max_size=20),
    st.integers(0, 200),
    st.lists(st.integers(0, 19), max_size=3),
)
def test_choose_shown_stays_in_budget_beyond_same_key(
    costs: list[int], budget: int, keyed: list[int]
) -> None:
    ids = [f"f{i}" for i in range(len(costs))]
    tokens = dict(zip(ids, costs, strict=True))
    same = [ids[k] for k in keyed if k < len(ids)]
    ranked = [list(reversed(ids))]
    chosen = choose_shown(ids, tokens, budget, same, ranked)
    assert set(same) <= set(chosen)
    extra = [i for i in chosen if i not in same]
    if set(chosen) != set(ids):
        assert sum(tokens[i] for i in set(same) | set(extra)) <= max(
            budget, sum(tokens[i] for i in set(same))
        )

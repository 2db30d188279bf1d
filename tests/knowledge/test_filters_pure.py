"""Query language parsing and reference semantics (pure)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.knowledge.filters import (
    Condition,
    FilterError,
    OrderBy,
    matches,
    parse_order_by,
    parse_query,
)

REC = {
    "id": uuid.UUID(int=5),
    "scope": "project/p1",
    "kind": "decision",
    "source": "user",
    "text": None,
    "tags": ["a", "b"],
    "importance": 0.7,
    "token_cost": 12,
    "created_at": datetime(2026, 1, 1, tzinfo=UTC),
    "updated_at": datetime(2026, 1, 2, tzinfo=UTC),
}


def test_seed_examples() -> None:
    q = parse_query({"kind": "code", "tags": ["bug_fix"]})
    assert q.conditions == (Condition("kind", "eq", "code"), Condition("tags", "any", ("bug_fix",)))
    q = parse_query({"source": "user", "importance": {"$gte": 0.7}})
    assert Condition("importance", "gte", 0.7) in q.conditions


@pytest.mark.parametrize(
    "filters,expected",
    [
        ({"kind": "decision"}, True),
        ({"kind": "other"}, False),
        ({"kind": ["x", "decision"]}, True),
        ({"tags": ["z", "b"]}, True),
        ({"tags": ["z"]}, False),
        ({"tags": "a"}, True),
        ({"tags": {"$ne": "a"}}, False),
        ({"tags": {"$ne": ["z"]}}, True),
        ({"importance": {"$eq": 0.7}}, True),
        ({"importance": {"$ne": 0.7}}, False),
        ({"importance": {"$gt": 0.7}}, False),
        ({"importance": {"$gte": 0.7}}, True),
        ({"importance": {"$lt": 0.7}}, False),
        ({"importance": {"$lte": 0.7}}, True),
        ({"importance": {"$gt": 0.5, "$lt": 0.8}}, True),
        ({"token_cost": {"$lt": 12}}, False),
        ({"created_at": {"$gte": "2026-01-01T00:00:00Z"}}, True),
        ({"timestamp": {"$lt": "2026-01-01"}}, False),
        ({"text": None}, True),
        ({"text": {"$ne": None}}, False),
        ({"scope": "project/p1"}, True),
        ({"scope": "project/p2"}, False),
        ({"scope": {"$ne": "global"}}, True),
        ({"id": str(uuid.UUID(int=5))}, True),
        ({"kind": {"$ne": ["decision"]}}, False),
    ],
)
def test_reference_semantics(filters: dict, expected: bool) -> None:
    assert matches(parse_query(filters), REC) is expected


def test_unknown_fields_and_operators_are_all_listed() -> None:
    with pytest.raises(FilterError) as exc:
        parse_query({"colour": 1, "importance": {"$regex": "x", "$in": [1]}, "$or": []})
    locs = {tuple(e["loc"]) for e in exc.value.errors}
    assert locs == {
        ("filters", "colour"),
        ("filters", "$or"),
        ("filters", "importance", "$regex"),
        ("filters", "importance", "$in"),
    }


@pytest.mark.parametrize(
    "filters",
    [
        {"kind": {"$gt": "a"}},
        {"tags": {"$gte": "a"}},
        {"importance": "high"},
        {"importance": True},
        {"tags": []},
        {"kind": None},
        {"created_at": "yesterday"},
        {"scope": "project/"},
        {"importance": {}},
        {"token_cost": {"$lt": [1, 2]}},
        {"id": "nope"},
    ],
)
def test_invalid_values_rejected(filters: dict) -> None:
    with pytest.raises(FilterError):
        parse_query(filters)


def test_order_by_sign_convention() -> None:
    assert parse_order_by("importance") == OrderBy("importance", descending=True)
    assert parse_order_by("-importance") == OrderBy("importance", descending=False)
    assert parse_order_by("timestamp") == OrderBy("created_at", True)
    for bad in ("tags", "-", "", "nope", 3):
        with pytest.raises(FilterError):
            parse_order_by(bad)


@pytest.mark.parametrize("limit", [0, 501, "5", 2.0, True])
def test_limit_bounds(limit: object) -> None:
    with pytest.raises(FilterError):
        parse_query({}, limit=limit)


json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5)
)
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=12), json_values, max_size=4), json_values, json_values)
def test_parser_only_ever_returns_a_query_or_filter_error(filters, order_by, limit) -> None:
    try:
        parse_query(filters, order_by=order_by, limit=limit)
    except FilterError as exc:
        assert exc.errors and all("loc" in e and "msg" in e for e in exc.errors)


@pytest.mark.parametrize(
    "filters",
    [
        {"token_cost": {"$lt": 10**30}},
        {"importance": 10**400},
        {"importance": float("inf")},
        {"created_at": "0001-01-01T00:00:00+14:00"},
    ],
)
def test_out_of_range_values_rejected(filters: dict) -> None:
    with pytest.raises(FilterError):
        parse_query(filters)

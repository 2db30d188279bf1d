"""Dates a query names (app/search/dates.py), pure."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.search.bm25 import Doc, WindowParams, rank_windowed
from app.search.dates import MAX_DATES, DateSpec, matches, named_dates


@pytest.mark.parametrize(
    "text,expected",
    [
        ("When did Caroline go to the support group on 7 May 2023?", [DateSpec(2023, 5, 7)]),
        ("What did Mel do in May?", [DateSpec(None, 5, None)]),
        ("What happened in March?", [DateSpec(None, 3, None)]),
        ("on 9 November, 2022 and November 9th", [DateSpec(2022, 11, 9), DateSpec(None, 11, 9)]),
        ("the 25th of december", [DateSpec(None, 12, 25)]),
        ("Sept 5", [DateSpec(None, 9, 5)]),
        ("2023-05-08 and 2023-05", [DateSpec(2023, 5, 8), DateSpec(2023, 5, None)]),
        ("what changed in 2022?", [DateSpec(2022, None, None)]),
        ("May 2023 trip", [DateSpec(2023, 5, None)]),
        # the verbs, and the start of a sentence
        ("Did they march in the parade?", []),
        ("May I ask what we decided?", []),
        ("you may want the mar version", []),
        ("room 42, 10 items, 3000 rows", []),
        ("Jan 2024 and jan 2024", [DateSpec(2024, 1, None)]),
    ],
)
def test_named_dates(text, expected):
    assert named_dates(text) == expected


def test_impossible_dates_are_dropped():
    assert named_dates("on 45 March 2023") == [DateSpec(2023, 3, None)]
    assert named_dates("2023-13-01") == [DateSpec(2023, None, None)]


@given(st.text(max_size=300))
def test_named_dates_never_raises(text):
    out = named_dates(text)
    assert len(out) <= MAX_DATES and len(set(out)) == len(out)
    for spec in out:
        assert spec.month is None or 1 <= spec.month <= 12
        assert spec.day is None or 1 <= spec.day <= 31


def test_matches_at_the_named_precision():
    assert matches(DateSpec(None, 5, None), 2021, 5, 30)
    assert matches(DateSpec(2023, 5, 8), 2023, 5, 8)
    assert not matches(DateSpec(2023, 5, 8), 2022, 5, 8)
    assert matches(DateSpec(2023, None, None), 2023, 12, 31)


def test_messages_of_a_named_date_rank_higher_in_the_reference():
    start = datetime(2023, 4, 29, tzinfo=UTC)
    docs = [
        Doc(
            ("s", i),
            {"trip": [1]},
            sort_key=(-i,),
            session="s",
            seq=i,
            created_at=start + timedelta(days=i),
        )
        for i in range(1, 6)
    ]
    plain = rank_windowed(docs, ["trip"], windows=WindowParams(window=0, weight=0.0))
    boosted = rank_windowed(
        docs,
        ["trip"],
        windows=WindowParams(window=0, weight=0.0),
        dates=named_dates("the trip on 1 May"),
    )
    assert plain[0][0] == ("s", 5)  # ties: newest first
    assert boosted[0][0] == ("s", 2) and boosted[0][1] == pytest.approx(3 * plain[0][1])
    # a boost of 1 changes nothing
    same = rank_windowed(
        docs,
        ["trip"],
        windows=WindowParams(0, 0.0, date_boost=1.0),
        dates=named_dates("the trip on 1 May"),
    )
    assert same == plain

"""Reference BM25: hand-computed values, ordering and invariants."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.search.bm25 import BM25Params, Doc, WindowParams, idf, rank, rank_windowed, term_score


def test_idf_is_lucene_variant():
    assert idf(10, 2) == pytest.approx(math.log(1 + (10 - 2 + 0.5) / 2.5))
    # Never negative, even for a term in every document.
    assert idf(3, 3) > 0


def test_hand_computed_score():
    docs = [
        Doc("a", {"cat": [1, 4], "sat": [2]}),  # |d| = 3
        Doc("b", {"dog": [1]}),  # |d| = 1
        Doc("c", {"cat": [1], "dog": [2], "mat": [3], "hat": [4]}),  # |d| = 4
    ]
    avgdl = 8 / 3
    cat_idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    k1, b = 1.2, 0.75
    expect_a = cat_idf * 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 3 / avgdl))
    expect_c = cat_idf * 1 * (k1 + 1) / (1 + k1 * (1 - b + b * 4 / avgdl))
    result = rank(docs, ["cat"])
    assert [doc_id for doc_id, _ in result] == ["a", "c"]
    assert result[0][1] == pytest.approx(expect_a, abs=1e-12)
    assert result[1][1] == pytest.approx(expect_c, abs=1e-12)


def test_distinct_query_terms_and_empty_docs():
    docs = [Doc("a", {"x": [1]}), Doc("empty", {}), Doc("b", {"y": [1]})]
    once = rank(docs, ["x"])
    twice = rank(docs, ["x", "x"])
    assert once == twice
    # The empty document is not part of N.
    assert once[0][1] == pytest.approx(term_score(1, 1, 1.0, idf(2, 1), BM25Params()))


def test_position_less_lexeme_counts_once():
    assert Doc("a", {"x": []}).length == 1
    assert Doc("a", {"x": []}).tf("x") == 1


def test_tie_break_by_sort_key_and_limit():
    docs = [Doc(i, {"x": [1]}, sort_key=(-i,)) for i in range(5)]
    assert [d for d, _ in rank(docs, ["x"], limit=3)] == [4, 3, 2]


def test_b_zero_ignores_length():
    docs = [Doc("short", {"x": [1]}), Doc("long", {"x": [1], "y": [2, 3, 4, 5]})]
    scores = dict(rank(docs, ["x"], BM25Params(k1=1.2, b=0.0)))
    assert scores["short"] == pytest.approx(scores["long"])


@pytest.mark.parametrize("k1,b", [(-1, 0.5), (1.2, 1.5), (float("nan"), 0.5)])
def test_invalid_params(k1, b):
    with pytest.raises(ValueError):
        BM25Params(k1=k1, b=b)


lexeme = st.sampled_from(["a", "b", "c", "d", "e"])
doc_strategy = st.dictionaries(lexeme, st.lists(st.integers(1, 50), max_size=4), max_size=5)


@given(st.lists(doc_strategy, max_size=12), st.lists(lexeme, max_size=4))
def test_rank_invariants(raw_docs, query):
    docs = [Doc(i, lx, sort_key=(i,)) for i, lx in enumerate(raw_docs)]
    result = rank(docs, query)
    scores = [s for _, s in result]
    assert scores == sorted(scores, reverse=True)
    assert all(s > 0 and math.isfinite(s) for s in scores)
    # Exactly the documents that contain a query term are returned.
    expected = {d.id for d in docs if d.length and any(t in d.lexemes for t in query)}
    assert {i for i, _ in result} == expected


# --- conversation-aware ranking (rank_windowed) ---


def convo(session: str, raw_docs: list[dict]) -> list[Doc]:
    return [
        Doc((session, i + 1), lx, sort_key=(-(i + 1), session), session=session, seq=i + 1)
        for i, lx in enumerate(raw_docs)
    ]


def test_window_ranks_the_neighbour_of_a_match():
    docs = convo(
        "s",
        [
            {"x": [1]},
            {"when": [1]},
            {"filler": [1]},
            {"other": [1]},
            {"more": [1]},
            {"x": [1]},
            {"y": [1, 2, 3]},
            {"z": [1]},
        ],
    )
    # "when" holds no query lexeme but sits next to "x": the window brings it in.
    result = dict(rank_windowed(docs, ["x"], windows=WindowParams(window=1, weight=2.0)))
    assert ("s", 2) in result and ("s", 2) not in dict(rank(docs, ["x"]))
    best = max(result, key=lambda k: result[k])
    assert best == ("s", 1) or best == ("s", 6)
    # A message with a query lexeme outranks its neighbours that have none.
    assert result[("s", 1)] > result[("s", 2)]


def test_window_never_crosses_sessions():
    a = convo("a", [{"q": [1]}, {"w": [1]}])
    b = convo("b", [{"e": [1]}, {"r": [1]}])
    result = dict(rank_windowed(a + b, ["q"], windows=WindowParams(window=2, weight=1.0)))
    assert set(result) == {("a", 1), ("a", 2)}


@given(st.lists(doc_strategy, max_size=12), st.lists(lexeme, max_size=4))
def test_window_zero_is_plain_bm25(raw_docs, query):
    docs = convo("s", raw_docs)
    plain = rank(docs, query)
    windowed = rank_windowed(
        docs, query, windows=WindowParams(window=0, weight=0.0, prior_weight=0.0)
    )
    assert [d for d, _ in windowed] == [d for d, _ in plain]
    assert [s for _, s in windowed] == pytest.approx([s for _, s in plain], abs=1e-12)


@given(
    st.lists(doc_strategy, max_size=16),
    st.lists(doc_strategy, max_size=8),
    st.lists(lexeme, max_size=4),
    st.integers(0, 3),
    st.floats(0, 5),
    st.integers(1, 6),
)
def test_window_invariants(first, second, query, window, weight, seeds):
    docs = convo("a", first) + convo("b", second)
    windows = WindowParams(window=window, weight=weight, seeds=seeds)
    result = rank_windowed(docs, query, windows=windows)
    scores = [s for _, s in result]
    assert scores == sorted(scores, reverse=True)
    assert all(s >= 0 and math.isfinite(s) for s in scores)
    by_id = {d.id: d for d in docs}
    seeds_ = [d for d, _ in rank(docs, query)[:seeds]]
    for doc_id, _ in result:
        d = by_id[doc_id]
        # Every result is a document within `window` of a seed of its own session.
        assert d.length > 0
        assert any(
            by_id[s].session == d.session and abs(by_id[s].seq - d.seq) <= window for s in seeds_
        )
    # The seeds themselves are always candidates.
    assert set(seeds_) <= {doc_id for doc_id, _ in result}


def test_window_params_are_validated():
    for bad in ({"window": -1}, {"window": 11}, {"weight": float("inf")}, {"seeds": 0}):
        with pytest.raises(ValueError):
            WindowParams(**bad)

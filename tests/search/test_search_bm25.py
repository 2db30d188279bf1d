"""Reference BM25: hand-computed values, ordering and invariants."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.search.bm25 import BM25Params, Doc, idf, rank, term_score


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

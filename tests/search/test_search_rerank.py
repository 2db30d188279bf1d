"""Rerank prompt and the defensive parser of the LLM's answer."""

import json

from hypothesis import given
from hypothesis import strategies as st

from app.search.rerank import (
    MAX_CANDIDATES,
    PREVIEW_CHARS,
    RerankCandidate,
    build_prompt,
    cache_key,
    order_by_scores,
    parse_scores,
    preview,
)


def cands(n):
    return [
        RerankCandidate(id=i, role="user", text=f"message {i}", bm25_score=float(n - i))
        for i in range(n)
    ]


def test_prompt_lists_at_most_50_candidates_with_short_previews():
    many = [
        RerankCandidate(id=i, role="assistant", text="x" * 1000, bm25_score=1.0) for i in range(60)
    ]
    prompt = build_prompt('find "this"', many)
    assert "[49]" in prompt and "[50]" not in prompt
    line = next(line for line in prompt.splitlines() if line.startswith("[0]"))
    assert len(json.loads(line.split(": ", 1)[1])) <= PREVIEW_CHARS
    assert json.dumps('find "this"') in prompt


def test_preview_collapses_whitespace_and_cuts():
    assert preview("a \n\n b") == "a b"
    assert len(preview("y" * 500)) == PREVIEW_CHARS


def test_parse_plain_json():
    assert parse_scores('[{"index": 0, "score": 10}, {"index": 1, "score": 2.5}]', 2) == {
        0: 10.0,
        1: 2.5,
    }


def test_parse_code_fence_and_prose():
    text = 'Sure! Here you go:\n```json\n[{"index": 1, "score": 7}]\n```\nHope it helps [sic].'
    assert parse_scores(text, 3) == {1: 7.0}
    assert parse_scores('Result: [{"index": 2, "score": "9"}] done', 3) == {2: 9.0}


def test_parse_drops_bad_entries_and_clamps():
    text = json.dumps(
        [
            {"index": 0, "score": 15},
            {"index": 0, "score": 1},  # duplicate: first wins
            {"index": 7, "score": 5},  # out of range
            {"index": -1, "score": 5},
            {"index": 1.5, "score": 5},
            {"index": True, "score": 5},
            {"index": 1, "score": "high"},
            {"index": 2, "score": -3},
            {"index": "1", "score": 4},
            [3, 6],
            "junk",
        ]
    )
    assert parse_scores(text, 4) == {0: 10.0, 2: 0.0, 1: 4.0, 3: 6.0}


def test_parse_object_wrapper():
    assert parse_scores('{"scores": [{"index": 0, "score": 3}]}', 1) == {0: 3.0}


def test_parse_unusable_answers():
    for text in ["", "no json here", "[]", '[{"index": 9, "score": 1}]', "{", '{"a": 1}', "[NaN]"]:
        assert parse_scores(text, 3) is None
    assert parse_scores(None, 3) is None
    assert parse_scores('[{"index": 0, "score": 1}]', 0) is None
    assert parse_scores('[{"index": 0, "score": NaN}]', 1) is None


def test_order_by_scores_llm_then_bm25_then_unscored():
    c = cands(4)  # bm25: 4, 3, 2, 1
    ordered = order_by_scores(c, {3: 9.0, 1: 5.0, 2: 5.0})
    assert [(x.id, s) for x, s in ordered] == [(3, 9.0), (1, 5.0), (2, 5.0), (0, None)]


def test_cache_key_depends_on_set_not_order():
    assert cache_key("q", [1, 2], "m") == cache_key("q", [2, 1], "m")
    assert cache_key("q", [1, 2], "m") != cache_key("q", [1, 3], "m")
    assert cache_key("q", [1], "m") != cache_key("q2", [1], "m")


json_entry = st.one_of(
    st.fixed_dictionaries(
        {
            "index": st.one_of(st.integers(), st.floats(), st.text(), st.none()),
            "score": st.one_of(st.integers(), st.floats(), st.text(), st.booleans()),
        }
    ),
    st.lists(st.integers(), max_size=3),
    st.text(max_size=5),
)


@given(st.text(max_size=2000), st.integers(-2, MAX_CANDIDATES))
def test_parse_never_raises_on_any_text(text, n):
    result = parse_scores(text, n)
    assert result is None or all(0 <= i < n and 0 <= s <= 10 for i, s in result.items())


@given(
    st.lists(json_entry, max_size=20), st.integers(0, 10), st.sampled_from(["", "```\n", "ok: "])
)
def test_parse_never_raises_on_json_like(entries, n, prefix):
    result = parse_scores(
        prefix + json.dumps(entries) + ("\n```" if prefix.startswith("```") else ""), n
    )
    assert result is None or all(0 <= i < n and 0 <= s <= 10 for i, s in result.items())

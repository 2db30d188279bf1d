"""Query cleaning: any text in, safe word candidates out; tsquery quoting."""

from hypothesis import given
from hypothesis import strategies as st

from app.search.query import (
    MAX_QUERY_CHARS,
    MAX_TERM_CHARS,
    MAX_TERMS,
    normalize_query,
    query_terms,
    quote_lexeme,
    tsquery_or,
)


def test_plain_words():
    assert query_terms("optimizing databases") == ["optimizing", "databases"]


def test_operators_quotes_and_punctuation_removed():
    assert query_terms("\"foo\" & !bar | (baz:*) <-> 'qux'") == ["foo", "bar", "baz", "qux"]
    assert query_terms("!!! ??? ... &&& ||| ''' \"\"\"") == []


def test_inner_punctuation_kept_for_the_parser():
    assert query_terms("e-mail foo@bar.com v1.2.3,") == ["e-mail", "foo@bar.com", "v1.2.3"]


def test_dedup_case_insensitive():
    assert query_terms("Cat cat CAT dog") == ["Cat", "dog"]


def test_control_nul_and_surrogates_dropped():
    assert query_terms("ab\x00c\u200bd \ud800 e\x07f") == ["abcd", "ef"]


def test_unicode_words_and_nfkc():
    assert query_terms("café 日本語 ｆｕｌｌｗｉｄｔｈ") == ["café", "日本語", "fullwidth"]


def test_caps():
    assert len(normalize_query("x " * 10_000)) <= MAX_QUERY_CHARS
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)))) == MAX_TERMS
    assert query_terms("a" * (MAX_TERM_CHARS + 1)) == []


def test_non_string_input():
    assert query_terms(None) == []
    assert query_terms(42) == []


def test_tsquery_quoting():
    assert quote_lexeme("it's") == "'it''s'"
    assert quote_lexeme("a\\b") == "'a\\\\b'"
    assert tsquery_or(["b", "a", "b", ""]) == "'a' | 'b'"
    assert tsquery_or([]) == ""


@given(st.text(max_size=3000))
def test_query_terms_never_raises_and_is_clean(text):
    terms = query_terms(text)
    assert len(terms) <= MAX_TERMS
    for t in terms:
        assert t and len(t) <= MAX_TERM_CHARS
        assert " " not in t and "\x00" not in t
        t.encode("utf-8")  # no lone surrogates
        assert t[0].isalnum() and t[-1].isalnum()


@given(st.lists(st.text(max_size=20), max_size=10))
def test_tsquery_or_never_raises(lexemes):
    out = tsquery_or(lexemes)
    assert "\x00" not in out

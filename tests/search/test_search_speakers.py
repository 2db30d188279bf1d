"""Who wrote a message and which authors a query names (app/search/speakers.py), pure."""

from hypothesis import given
from hypothesis import strategies as st

from app.search.speakers import MAX_AUTHOR_CHARS, author_of, named_authors


def test_the_author_is_the_name_else_a_leading_name_and_colon():
    assert author_of("Gina", "Caroline: hi") == "gina"
    assert author_of(None, "Caroline: Hey Mel!") == "caroline"
    assert author_of("", "  Jon Snow :\tWinter") == "jon snow"
    assert author_of(None, "Nate:\nthe list") == "nate"


def test_text_that_is_no_transcript_has_no_author():
    for text in [
        "see https://example.com",
        "a\nb: c",
        ": x",
        "Note:x",
        "Bob:",
        "",
        None,
        "x" * MAX_AUTHOR_CHARS + "y: too far for a name",
        "   : nobody",
    ]:
        assert author_of(None, text) is None, text


def test_a_query_names_its_words_and_runs_of_them():
    names = named_authors("What did Melanie's friend Jon Snow say?")
    assert {"melanie", "jon snow", "friend jon snow", "what"} <= set(names)
    assert "melanie's" not in names and len(names) == len(set(names))
    assert named_authors("") == [] and named_authors(None) == []


@given(
    st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,11}", fullmatch=True), min_size=1, max_size=3),
    st.text(max_size=80),
)
def test_a_speaker_named_in_the_query_is_found(words, rest):
    """Names of one to three words, as the query writes them (any case, possessive)."""
    name = " ".join(words)
    author = author_of(None, f"{name}: {rest}")
    assert author == name.lower()
    assert author in named_authors(f"what did {name.upper()}'s friend say")

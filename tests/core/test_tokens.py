"""`text_and_count` gives what the append stored before it existed: `CanonicalMessage.text`
and `count_message`, each part serialised once."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.tokens import content_text, count_message, text_and_count, tool_calls_text

WORDS = st.text(alphabet=st.sampled_from('ab 1\n{}"é😀'), max_size=20)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | WORDS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WORDS, inner, max_size=3),
    max_leaves=8,
)
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": WORDS}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "name": WORDS, "input": JSONISH}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "content": WORDS}),
    st.fixed_dictionaries({"type": st.just("image")}),
    st.dictionaries(WORDS, JSONISH, max_size=2),
)
CONTENT = st.none() | WORDS | st.lists(BLOCK | WORDS, max_size=4)
CALLS = st.none() | st.lists(
    st.fixed_dictionaries(
        {"id": WORDS, "name": WORDS, "input": st.dictionaries(WORDS, JSONISH, max_size=3)}
    ),
    max_size=3,
)


def old_text(content: Any, calls: list[dict[str, Any]] | None) -> str:
    return "\n".join(p for p in [content_text(content), tool_calls_text(calls)] if p)


@settings(max_examples=200)
@given(CONTENT, CALLS)
def test_the_same_text_and_count_as_before(
    content: Any, calls: list[dict[str, Any]] | None
) -> None:
    assert text_and_count(content, calls) == (
        old_text(content, calls),
        count_message("user", content, calls),
    )


def test_tool_calls_without_content() -> None:
    calls = [{"id": "1", "name": "", "input": {}}, {"id": "2", "name": "grep", "input": {"q": 1}}]
    assert text_and_count(None, calls) == (
        '\n{}\ngrep\n{"q":1}',
        count_message("assistant", None, calls),
    )

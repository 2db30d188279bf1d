"""The key, prefix and scope_id patterns in the OpenAPI document say exactly what keys.py does."""

import re

from hypothesis import given
from hypothesis import strategies as st

from app.shared_memory import keys
from app.shared_memory.errors import InvalidKey, InvalidScope


def _re(pattern: str) -> re.Pattern[str]:
    # JSON Schema (ECMA-262) `$` is the end of the string; Python's also matches before a "\n".
    return re.compile(pattern.replace("$", r"\Z"))


KEY, PREFIX, SCOPE = (
    _re(p) for p in (keys.KEY_PATTERN, keys.PREFIX_PATTERN, keys.SCOPE_ID_PATTERN)
)
texts = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    [
        "watch",
        "a/./b",
        "..",
        "a/..",
        "a/",
        "/a",
        " a",
        "a ",
        "a b",
        "x" * 257,
        "é" * 256,
        "a\u200bb",
        "a\u00a0b",
        "\ue000",
        "\U000e0001",
    ]
)


def _accepted(check, *args, **kwargs) -> bool:
    try:
        check(*args, **kwargs)
    except (InvalidKey, InvalidScope):
        return False
    return True


@given(texts)
def test_patterns_agree_with_the_validators(text: str) -> None:
    assert _accepted(keys.validate_key, text) == (
        bool(KEY.search(text)) and len(text) <= keys.MAX_KEY_CHARS
    )
    assert _accepted(keys.validate_key, text, allow_empty=True) == (
        bool(PREFIX.search(text)) and len(text) <= keys.MAX_KEY_CHARS
    )
    assert _accepted(keys.validate_scope_id, text) == (
        bool(SCOPE.search(text)) and 1 <= len(text) <= keys.MAX_SCOPE_CHARS
    )


@given(st.from_regex(KEY, fullmatch=True))
def test_every_key_the_pattern_admits_is_valid(key: str) -> None:
    if len(key) <= keys.MAX_KEY_CHARS:
        assert keys.validate_key(key) == key


def test_lone_surrogates_are_refused() -> None:
    assert not _accepted(keys.validate_key, "a\ud800")

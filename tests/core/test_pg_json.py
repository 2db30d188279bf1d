"""Stored JSON comes back exactly as it was sent through the hot paths' decoder."""

import json

from hypothesis import given
from hypothesis import strategies as st

from app.core.pg import loads

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_decodes_like_the_stdlib(value):
    text = json.dumps(value, ensure_ascii=False)
    got = loads(text)
    assert got == json.loads(text)
    assert repr(got) == repr(json.loads(text))  # ints stay ints, of any size


def test_integers_beyond_64_bits_stay_integers():
    for v in (2**64, 2**70, -(2**63) - 1, 10**30):
        got = loads(json.dumps({"v": v, "s": "text"}))["v"]
        assert got == v and isinstance(got, int)

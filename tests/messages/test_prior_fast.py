"""The append's fast prior (`app.messages.prior._scan`: the unrolled tokeniser, and the
ASCII loop `_scan_ascii`) counts exactly what the prior's first definition counted: the
reference below is `_scan` as issue 48 landed it (commit bb6fc3a), kept verbatim, so the
stored priors of the append, the import and migration 0020's backfill (all through
`app.messages.prior`) do not move with the speed-up. Pure: no database."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from app.messages import prior as P

# --- the reference (bb6fc3a) -------------------------------------------------------------

_REF_TOKEN = re.compile(
    r"[^\W\d_](?:[^\W_]|['\u2019-](?=[^\W_]))*|\d+(?:[.,:/]\d+)*|[.!?:;\"'(\u201c\u2018\[\u2014\n-]"
)


def _ref_scan(text: str) -> tuple[int, int, int, bool]:
    first = names = numbers = 0
    timed_ = False
    prev_kind = 0
    prev = prev2 = ""
    starts = True
    for token in _REF_TOKEN.findall(text[: P.MAX_CHARS]):
        head = token[0]
        if not head.isalnum():
            starts = True
            prev2, prev, prev_kind = prev, "", 0
            continue
        lower = token.lower()
        if "\u2019" in lower:
            lower = lower.replace("\u2019", "'")
        kind = P._KIND.get(lower, 0)
        if kind & P._FIRST:
            first += 1
        elif kind & P._NUMBER or head.isdigit():
            numbers += 1
        elif not starts and head.isupper():
            names += 1
        if not timed_ and (kind or head.isdigit() or head.isupper()):
            timed_ = bool(
                kind & P._TIME_WORD
                or token in P._MONTHS
                or (kind & P._PERIOD and prev_kind & P._DETERMINER)
                or (
                    kind & P._UNIT
                    and (
                        prev_kind & P._COUNT
                        or prev.isdigit()
                        or (prev == "of" and prev2 == "couple")
                    )
                )
                or P._is_year(token)
            )
        starts = False
        prev2, prev, prev_kind = prev, lower, kind
    return first, names, numbers, timed_


def _ref_prior(text: str, role: str, before: P.Before | None) -> float:
    first, names, numbers, _ = _ref_scan(text)
    feats = {
        "first_person": math.log1p(first),
        "answer": 1.0 if before is not None and before.role != role and before.asks else 0.0,
        "question": 1.0 if P.asks(text[: P.MAX_CHARS]) else 0.0,
        "names": math.log1p(names),
        "numbers": math.log1p(numbers),
    }
    return round(P.INTERCEPT + sum(P.WEIGHTS[k] * feats[k] for k in P.WEIGHTS), P.DIGITS)


# --- texts that reach every feature --------------------------------------------------------

# the words and marks the features read, in several cases, and the tokeniser's edge cases:
# inner apostrophes and hyphens, digits after letters, numbers with separators, marks that
# start a sentence and separators that do not
_WORDS = [
    *"I i'm I'm I’m i’VE My mY me we We'll WE us Our ourselves mine".split(),
    *"one Two THREE twelve twenty hundred dozen half first Second fifth".split(),
    *"yesterday Today tonight ago Monday fridays Sunday weekend".split(),
    *"last next this past coming week month Year night summer Fall".split(),
    *"a an A few several couple Couple of Of year years Days hour minutes decade".split(),
    *"May may Jan Sept June march March Dec".split(),
    *"1999 2019 2100 19 3 3.5 10,000 12:30 1/2 007 ²³ ١٩٩٩".split(),
    *"Bob Lisbon Rosa's O'Neil x-ray well-known don't don’t a1 b2c iPhone ÉCOLE école".split(),
    *"the and was good it so think ok straße ΣΑΣ σας İstanbul ǅemal ß".split(),
]
_MARKS = list(".!?:;\"'([\n-\u201c\u2018\u2014\u2019\u201d,)]/_ \t#") + ["--", "'-", "-'", "..."]

_pieces = st.one_of(
    st.sampled_from(_WORDS),
    st.sampled_from(_MARKS),
    st.text(max_size=4),  # anything else
)
_texts = st.lists(st.tuples(_pieces, st.sampled_from(["", " ", "  ", "\n"])), max_size=40).map(
    lambda parts: "".join(a + b for a, b in parts)
)
_ascii_texts = st.lists(
    st.tuples(
        st.one_of(
            st.sampled_from([w for w in _WORDS if w.isascii()]),
            st.sampled_from([m for m in _MARKS if m.isascii()]),
            st.text(st.characters(max_codepoint=127), max_size=4),
        ),
        st.sampled_from(["", " ", "\n"]),
    ),
    max_size=40,
).map(lambda parts: "".join(a + b for a, b in parts))


@settings(max_examples=1500)
@given(_texts)
def test_the_scan_counts_what_the_reference_counts(text: str) -> None:
    assert P._scan(text) == _ref_scan(text)
    assert P._TOKEN.findall(text) == _REF_TOKEN.findall(text)


@settings(max_examples=1500)
@given(_ascii_texts)
def test_the_ascii_loop_counts_what_the_reference_counts(text: str) -> None:
    assert text.isascii()
    assert P._scan_ascii(text) == _ref_scan(text)
    assert P._TOKEN_ASCII.findall(text) == _REF_TOKEN.findall(text)


@settings(max_examples=500)
@given(st.text(max_size=200))
def test_any_text_scans_as_the_reference_does(text: str) -> None:
    assert P._scan(text) == _ref_scan(text)


@given(
    st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), _texts), max_size=8),
    st.none() | st.builds(P.Before, st.sampled_from(["user", "assistant"]), st.booleans()),
)
def test_the_stored_priors_are_the_references(
    rows: list[tuple[str, str]], before: P.Before | None
) -> None:
    """What the append stores (`priors`), and what the import and the backfill store
    (`prior_of`, `timed` message by message), are the reference's values."""
    got = P.priors(rows, before)
    prev = before
    for (role, text), (prior, timed) in zip(rows, got, strict=True):
        assert prior == _ref_prior(text, role, prev) == P.prior_of(text, role, prev)
        assert timed == _ref_scan(text)[3] == P.timed(text)
        prev = P.Before(role, P.asks(text))


def test_known_texts() -> None:
    """A few by hand, so a change of the reference above is seen too."""
    for text, want in [
        ("I went to Lisbon with Bob 3 years ago.", (1, 2, 1, True)),
        ("Good. Fine! I think so", (1, 0, 0, False)),
        ("for a couple of months", (0, 0, 0, True)),
        ("it was in May, I think", (1, 1, 0, True)),
        ("you may go", (0, 0, 0, False)),
        ("We’ll meet Ana at 12:30 next week", (1, 1, 1, True)),
        ("back in 2019", (0, 0, 1, True)),
    ]:
        assert P._scan(text) == _ref_scan(text) == want, text

"""Which turns hold facts: a message's informativeness prior and its time flag. Pure: no I/O.

A search ranks by how well a message matches the query's words; among messages that match
about as well, some are the kind that states something worth remembering ("I adopted a
dog last week, her name is Luna") and some are not ("Haha, that's great! What about
you?"). The prior is a logistic model of "this message is evidence for some question",
computed once when the message is stored (`messages.prior`, the logit) from generic
features of its text and of the message before it in its session:

* `first_person`: log(1 + the count of first-person words: I, me, my, we, our, ...);
* `answer`: the message before it is by another role and ends with a question mark (an
  answer to the other speaker's question);
* `question`: the message itself ends with a question mark (negative);
* `names`: log(1 + capitalised words that do not start a sentence: names, places, titles);
* `numbers`: log(1 + numbers, digits or number words);
* the length: `LENGTH_WEIGHT` * log(1 + |d|), |d| the message's BM25 length
  (`messages.search_length`, its lexeme positions). It is not stored: the search adds it
  from the column it already reads, and the context's automatic recall leaves it out (a
  recall pays for a long message in tokens; favouring length there recalled fewer
  turns). The search multiplies scores, so a constant shift of the logit changes no
  order: log(|d| / the scope's average |d|) ranks exactly as log(|d|) does.

The append stores it (`app.messages.repository.append_rows`), and so do the import
(`app.portability.importer`) and the migration's backfill (0020_message_prior); the
search (`app.search.bm25`, `app.search.repository._BM25_SQL`) multiplies a message's
score by exp(`LAMBDA` * (prior + length term)), and the context's automatic recall,
which runs that search, ranks with it too (without the length term). It lives with the
messages because they store it (the messages domain is below the search's). The weights
were fitted on the LoCoMo development half (docs/search-prior.md says how, and how to
refit them); nothing here knows that format (no speaker prefixes, no image captions).

The time flag (`messages.timed`): the message carries a time expression (yesterday, last
week, three years, ago, a weekday, a month's name, a year). A query that asks for a time
(`asks_when`: when ..., what year, how long, ...) scores flagged messages `WHEN_BOOST`
times more.

`prior_of` and `timed` never raise, and are cheap (about 15 us for a 350-character ASCII
message; docs/search-prior.md, "Cost"): the append path computes them for every message
it stores.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# How much the prior moves a score: exp(LAMBDA * logit). The logits of a conversation's
# turns span about -3 .. +2, so scores move by a factor within about 0.6 .. 1.35.
LAMBDA = 0.15
# The factor for a message with a time expression when the query asks for a time.
WHEN_BOOST = 1.5

# The model: logit = INTERCEPT + sum(WEIGHTS[f] * feature f). Fitted on the LoCoMo
# development half (docs/search-prior.md); change them there and here together, and
# backfill the stored priors after a change (docs/search-prior.md).
INTERCEPT = -5.297
WEIGHTS: dict[str, float] = {
    "first_person": 0.442,
    "answer": 1.279,
    "question": -0.563,
    "names": 0.673,
    "numbers": 0.851,
}
# on log(1 + |d|), added by the search (not stored)
LENGTH_WEIGHT = 1.165
# The stored logit is rounded (a real column; the order it gives does not need more).
DIGITS = 4
# Only the head of a very long message is read (the features saturate long before).
MAX_CHARS = 4000

_FIRST_PERSON = frozenset(
    "i i'm im i've ive i'd i'll me my mine myself we we're we've we'd we'll us our ours "
    "ourselves".split()
)
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million billion dozen half first second third fourth "
    "fifth".split()
)
# One pass over the text: words (a letter, then letters and digits, with single
# apostrophes or hyphens inside), numbers, and the marks after which a capital starts a
# sentence (a capital after any other token is a name's). Written unrolled and possessive:
# it finds what `[^\W\d_](?:[^\W_]|['\u2019-](?=[^\W_]))*|...` finds, in about 0.65 of
# the time (no backtracking, no lookahead per character).
_TOKEN = re.compile(
    r"[^\W\d_][^\W_]*+(?:['\u2019-][^\W_]++)*+|\d++(?:[.,:/]\d++)*+"
    r"|[.!?:;\"'(\u201c\u2018\[\u2014\n-]"
)
# The same tokens of an ASCII text (most messages), where the classes are plain ranges
# (about half the time of `_TOKEN`).
_TOKEN_ASCII = re.compile(
    r"[A-Za-z][A-Za-z0-9]*+(?:['-][A-Za-z0-9]++)*+|[0-9]++(?:[.,:/][0-9]++)*+|[.!?:;\"'(\[\n-]"
)
_QUESTION_END = re.compile(r"\?[\s\"'\u201d\u2019)\]]*$")

# Time expressions: a word alone, a word after a determiner, a unit after a count.
_DAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_TIME_WORDS = frozenset(
    "yesterday today tonight tomorrow ago".split() + list(_DAYS) + [d + "s" for d in _DAYS]
)
_DETERMINERS = frozenset("last next this past coming".split())
_PERIODS = (
    frozenset("week month year night weekend summer winter spring fall autumn".split()) | _DAYS
)
_COUNTS = frozenset(
    "a an one two three four five six seven eight nine ten eleven twelve few several".split()
)
_UNITS = frozenset(
    "year years month months week weeks day days hour hours decade decades minute minutes".split()
)
# Month names only capitalised ("in May", not "you may"); abbreviations need the capital.
_MONTHS = frozenset(
    "January February March April May June July August September October November December "
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec".split()
)
_WHEN = re.compile(
    r"(?:^|[.!?]\s+)when\b|\bwhen\s+(?:did|was|is|does|do|will|has|had|were|are|would)\b|"
    r"\b(?:what|which)\s+(?:year|month|day|date|week|weekend|time|season)\b|"
    r"\bhow\s+long\b|\bsince\s+when\b",
    re.IGNORECASE,
)


def _is_year(token: str) -> bool:
    return len(token) == 4 and token.isdigit() and token[:2] in ("19", "20")


# What a lower-cased word is, as bits (one dictionary lookup a token).
_FIRST, _NUMBER, _TIME_WORD, _PERIOD, _DETERMINER, _COUNT, _UNIT = (1 << i for i in range(7))
_KIND: dict[str, int] = {}
for _words, _bit in (
    (_FIRST_PERSON, _FIRST),
    (_NUMBER_WORDS, _NUMBER),
    (_TIME_WORDS, _TIME_WORD),
    (_PERIODS, _PERIOD),
    (_DETERMINERS, _DETERMINER),
    (_COUNTS, _COUNT),
    (_UNITS, _UNIT),
):
    for _w in _words:
        _KIND[_w] = _KIND.get(_w, 0) | _bit


def _scan(text: str) -> tuple[int, int, int, bool]:
    """First-person words, names, numbers and whether a time expression occurs, in the
    head of `text` (`_scan_tokens` defines them; ASCII text takes `_scan_ascii`, which
    counts the same faster: the append computes this for every message it stores)."""
    head = text[:MAX_CHARS]
    if head.isascii():
        return _scan_ascii(head)
    return _scan_tokens(_TOKEN.findall(head))


def _scan_tokens(tokens: list[str]) -> tuple[int, int, int, bool]:
    """The features' definition, over a text's tokens (`_TOKEN`)."""
    first = names = numbers = 0
    timed_ = False
    prev_kind = 0
    prev = prev2 = ""
    starts = True  # the next capital starts a sentence
    for token in tokens:
        head = token[0]
        if not head.isalnum():
            starts = True
            prev2, prev, prev_kind = prev, "", 0
            continue
        lower = token.lower()
        if "\u2019" in lower:
            lower = lower.replace("\u2019", "'")
        kind = _KIND.get(lower, 0)
        if kind & _FIRST:
            first += 1
        elif kind & _NUMBER or head.isdigit():
            numbers += 1
        elif not starts and head.isupper():
            names += 1
        if not timed_ and (kind or head.isdigit() or head.isupper()):
            timed_ = bool(
                kind & _TIME_WORD
                or token in _MONTHS
                or (kind & _PERIOD and prev_kind & _DETERMINER)
                or (
                    kind & _UNIT
                    and (
                        prev_kind & _COUNT or prev.isdigit() or (prev == "of" and prev2 == "couple")
                    )
                )
                or _is_year(token)
            )
        starts = False
        prev2, prev, prev_kind = prev, lower, kind
    return first, names, numbers, timed_


# `_KIND` with the punctuation marks (`_MARK`): an ASCII token is looked up as it is first,
# which settles the lower-case words (whose lower case is themselves) and the marks.
_MARK = 1 << 7
_KIND_ASCII: dict[str, int] = {**_KIND, **dict.fromkeys(".!?:;\"'(\n-[", _MARK)}


def _scan_ascii(head: str) -> tuple[int, int, int, bool]:
    """`_scan_tokens(_TOKEN.findall(head))` for an ASCII `head` (the same tokens, and the
    same counts: tests/messages/test_prior_fast.py compares them), without a method call
    for the ordinary lower-case word: it is no name, number or time (`kind` 0, no digit
    or capital first) and is its own lower case."""
    first = names = numbers = 0
    timed_ = False
    prev_kind = 0
    prev = prev2 = ""
    starts = True  # the next capital starts a sentence
    get = _KIND_ASCII.get
    for token in _TOKEN_ASCII.findall(head):
        kind = get(token)
        if kind is None:
            if token.islower():  # an ordinary word
                starts = False
                prev2, prev, prev_kind = prev, token, 0
                continue
            # a capital, a digit or mixed case: as `_scan_tokens` does
            lower = token.lower()
            kind = _KIND.get(lower, 0)
            head_ = token[0]
            if kind & _FIRST:
                first += 1
            elif kind & _NUMBER or head_.isdigit():
                numbers += 1
            elif not starts and head_.isupper():
                names += 1
        elif kind == _MARK:
            starts = True
            prev2, prev, prev_kind = prev, "", 0
            continue
        else:  # a lower-case word the features read
            lower = token
            if kind & _FIRST:
                first += 1
            elif kind & _NUMBER:
                numbers += 1
        if not timed_:  # (`_scan_tokens` skips tokens that cannot be times: here all are)
            timed_ = bool(
                kind & _TIME_WORD
                or token in _MONTHS
                or (kind & _PERIOD and prev_kind & _DETERMINER)
                or (
                    kind & _UNIT
                    and (
                        prev_kind & _COUNT or prev.isdigit() or (prev == "of" and prev2 == "couple")
                    )
                )
                or _is_year(token)
            )
        starts = False
        prev2, prev, prev_kind = prev, lower, kind
    return first, names, numbers, timed_


@dataclass(frozen=True, slots=True)
class Before:
    """What the prior reads of the message before one in its session."""

    role: str
    asks: bool  # `asks(text)`

    @classmethod
    def of(cls, role: str | None, text: str | None) -> Before | None:
        """The previous message of this role and text (None when there is none)."""
        return None if role is None else cls(role, asks(text or ""))


def asks(text: str) -> bool:
    """Whether `text` ends with a question mark (closing quotes and brackets aside)."""
    return bool(_QUESTION_END.search(text[-200:] if len(text) > 200 else text))


# The same test in PostgreSQL, on a message `m` (the append reads the session's last
# message with it; `ASKS_SQL` and `asks` must agree, a test compares them).
ASKS_SQL = "(right(m.text, 200) ~ '\\?[\\s\"''\u201d\u2019)\\]]*$')"


def features(text: str, role: str, before: Before | None) -> dict[str, float]:
    """The model's features of a message (`text`, `role`) after `before`."""
    text = text if isinstance(text, str) else ""
    first, names, numbers, _ = _scan(text)
    return {
        "first_person": math.log1p(first),
        "answer": 1.0 if before is not None and before.role != role and before.asks else 0.0,
        "question": 1.0 if asks(text[:MAX_CHARS]) else 0.0,
        "names": math.log1p(names),
        "numbers": math.log1p(numbers),
    }


def logit(
    feats: dict[str, float],
    weights: dict[str, float] | None = None,
    intercept: float | None = None,
) -> float:
    """The model's logit for `feats` (the fitted weights unless others are given)."""
    w = WEIGHTS if weights is None else weights
    b = INTERCEPT if intercept is None else intercept
    return b + sum(w[k] * feats.get(k, 0.0) for k in w)


def prior_of(text: str, role: str, before: Before | None) -> float:
    """The stored prior (the logit, rounded) of a message after `before`."""
    return round(logit(features(text, role, before)), DIGITS)


def timed(text: str) -> bool:
    """Whether `text` carries a time expression (the module docstring)."""
    return isinstance(text, str) and _scan(text)[3]


def prior_and_timed(text: str, role: str, before: Before | None) -> tuple[float, bool]:
    """`prior_of` and `timed` of a message in one pass over its text."""
    return priors(((role, text),), before)[0]


# The features in the order of `WEIGHTS` (the order `logit` adds them in: `priors` adds
# the same terms in the same order, so its values are `prior_of`'s to the last bit).
_FEATURES = ("first_person", "answer", "question", "names", "numbers")
assert tuple(WEIGHTS) == _FEATURES


def asks_when(query: str) -> bool:
    """Whether a search query asks for a time (when ..., what year, how long, ...)."""
    return isinstance(query, str) and bool(_WHEN.search(query[:4000]))


def length_term(search_length: int, weight: float = LENGTH_WEIGHT) -> float:
    """The length's part of the logit, for a message of BM25 length `search_length`."""
    return weight * math.log1p(max(search_length, 0))


def factor(
    prior: float, search_length: int, weight: float = LAMBDA, length_weight: float = LENGTH_WEIGHT
) -> float:
    """What the search multiplies a message's score by: exp(weight * (prior + length))."""
    return math.exp(weight * (prior + length_term(search_length, length_weight)))


def priors(
    rows: Iterable[tuple[str, str]], before: Before | None = None
) -> list[tuple[float, bool]]:
    """(prior, timed) of consecutive messages (role, text) of one session, in order;
    `before`: the session's message before the first (None: they start the session)."""
    out: list[tuple[float, bool]] = []
    w_first, w_answer, w_question, w_names, w_numbers = (WEIGHTS[k] for k in _FEATURES)
    log1p = math.log1p
    # what `answer` reads of the message before: its role, and whether it asks
    asked_by = before.role if before is not None and before.asks else None
    for role, text in rows:
        text = text if isinstance(text, str) else ""
        first, names, numbers, timed_ = _scan(text)
        question = asks(text[:MAX_CHARS])
        # `logit(features(text, role, before))`, the terms added as it adds them
        value = INTERCEPT + sum(
            (
                w_first * log1p(first),
                w_answer * (1.0 if asked_by is not None and asked_by != role else 0.0),
                w_question * (1.0 if question else 0.0),
                w_names * log1p(names),
                w_numbers * log1p(numbers),
            )
        )
        out.append((round(value, DIGITS), timed_))
        asks_ = question if len(text) <= MAX_CHARS else asks(text)
        asked_by = role if asks_ else None
    return out


def as_answer(prior: float) -> float:
    """The prior of a message that was not an answer (`answer` 0) had it been one: what
    the append stores for its first message when the session's last one asks by another
    role (the feature is a plain term of the logit)."""
    return round(prior + WEIGHTS["answer"], DIGITS)


def weights_table(order: Sequence[str] = tuple(WEIGHTS)) -> list[tuple[str, float]]:
    """The model's weights, intercept first and the length's last (the docs print them)."""
    return [
        ("intercept", INTERCEPT),
        *((k, WEIGHTS[k]) for k in order),
        ("length", LENGTH_WEIGHT),
    ]

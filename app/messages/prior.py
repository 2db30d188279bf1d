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
* `length`: log(1 + the number of words). The search multiplies scores, so a constant
  shift of the logit changes no order: log(length / the scope's average length) ranks
  exactly as log(length) does, and the stored figure needs no average.

The append stores it (`app.messages.repository.append_rows`), and so do the import
(`app.portability.importer`) and the migration's backfill (0020_message_prior); the
search (`app.search.bm25`, `app.search.repository._BM25_SQL`) multiplies a message's
score by exp(`LAMBDA` * logit), so the context's automatic recall, which runs that
search, ranks with it too. It lives with the messages because they store it (the
messages domain is below the search's). The weights were fitted on the LoCoMo development half
(docs/search-prior.md says how, and how to refit them); nothing here knows that format
(no speaker prefixes, no image captions).

The time flag (`messages.timed`): the message carries a time expression (yesterday, last
week, three years, ago, a weekday, a month's name, a year). A query that asks for a time
(`asks_when`: when ..., what year, how long, ...) scores flagged messages `WHEN_BOOST`
times more.

`prior_of` and `timed` never raise, and are cheap (tens of microseconds): the append path
computes them for every message it stores.
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
INTERCEPT = -5.657
WEIGHTS: dict[str, float] = {
    "first_person": 0.399,
    "answer": 1.282,
    "question": -0.607,
    "names": 0.738,
    "numbers": 0.839,
    "length": 1.084,
}
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
_WORD = re.compile(r"[^\W\d_](?:[^\W_]|['\u2019-](?=[^\W_]))*|\d+(?:[.,:/]\d+)*")
# a sentence ends before this position: the previous non-space character ends a sentence
_SENTENCE_END = frozenset(".!?:;\"'(\u201c\u2018[-\u2014\n")
_QUESTION_END = re.compile(r"\?[\s\"'\u201d\u2019)\]]*$")

_UNITS = r"(?:years?|months?|weeks?|days?|hours?|decades?|minutes?)"
_COUNTS = (
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|few|"
    r"several|couple\s+of|a\s+couple\s+of)"
)
_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_PERIODS = rf"(?:week|month|year|night|weekend|summer|winter|spring|fall|autumn|{_DAYS})"
_TIME = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|ago|"
    rf"(?:last|next|this|past|coming)\s+{_PERIODS}|"
    rf"{_COUNTS}\s+{_UNITS}|{_DAYS}s?|(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
# Month names only capitalised ("in May", not "you may"); abbreviations need the capital.
_MONTH = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\b"
)
_WHEN = re.compile(
    r"(?:^|[.!?]\s+)when\b|\bwhen\s+(?:did|was|is|does|do|will|has|had|were|are|would)\b|"
    r"\b(?:what|which)\s+(?:year|month|day|date|week|weekend|time|season)\b|"
    r"\bhow\s+long\b|\bsince\s+when\b",
    re.IGNORECASE,
)


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
    text = text[:MAX_CHARS] if isinstance(text, str) else ""
    words = 0
    first = names = numbers = 0
    for m in _WORD.finditer(text):
        word = m.group()
        words += 1
        lower = word.lower().replace("\u2019", "'")
        if lower in _FIRST_PERSON:
            first += 1
        if word[0].isdigit() or lower in _NUMBER_WORDS:
            numbers += 1
        elif word[0].isupper() and lower not in _FIRST_PERSON:
            head = text[: m.start()].rstrip()
            if head and head[-1] not in _SENTENCE_END:
                names += 1
    return {
        "first_person": math.log1p(first),
        "answer": 1.0 if before is not None and before.role != role and before.asks else 0.0,
        "question": 1.0 if asks(text) else 0.0,
        "names": math.log1p(names),
        "numbers": math.log1p(numbers),
        "length": math.log1p(words),
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
    if not isinstance(text, str):
        return False
    head = text[:MAX_CHARS]
    return bool(_TIME.search(head) or _MONTH.search(head))


def asks_when(query: str) -> bool:
    """Whether a search query asks for a time (when ..., what year, how long, ...)."""
    return isinstance(query, str) and bool(_WHEN.search(query[:4000]))


def factor(prior: float) -> float:
    """What the prior multiplies a score by: exp(LAMBDA * prior)."""
    return math.exp(LAMBDA * prior)


def priors(
    rows: Iterable[tuple[str, str]], before: Before | None = None
) -> list[tuple[float, bool]]:
    """(prior, timed) of consecutive messages (role, text) of one session, in order;
    `before`: the session's message before the first (None: they start the session)."""
    out: list[tuple[float, bool]] = []
    for role, text in rows:
        out.append((prior_of(text, role, before), timed(text)))
        before = Before(role, asks(text))
    return out


def weights_table(order: Sequence[str] = tuple(WEIGHTS)) -> list[tuple[str, float]]:
    """The model's weights, intercept first (the docs print them)."""
    return [("intercept", INTERCEPT), *((k, WEIGHTS[k]) for k in order)]

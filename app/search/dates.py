"""Dates a search query names ("in May 2023", "on 9 November, 2022", "2023-05-08"). Pure.

The ranking boosts messages whose `created_at` falls on a date the query names (at the
precision it names: a day, a month, a year; a month or day without a year matches any
year). Imported history keeps its original times, so "what did we decide in March 2023?"
finds the turns of that month first.

Ambiguous words count as months only when they look like dates: "may" and "march" need a
day or a year next to them, or a capital letter inside a sentence ("in March", but not
"May I..."); "sept"/"sep" and the other
abbreviations are taken as they come. Years are 1900-2099 standing alone. Never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
MONTH_NUMBERS = {name: i + 1 for i, name in enumerate(_MONTHS)}
MONTH_NUMBERS.update({name[:3]: i + 1 for i, name in enumerate(_MONTHS)})
MONTH_NUMBERS["sept"] = 9
# Words that are months only when they look like a date (the verbs "may", "march").
_AMBIGUOUS = frozenset({"may", "march", "mar"})

_MONTH = "(" + "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_NAMED = re.compile(
    rf"(?:\b{_DAY}\s+(?:of\s+)?)?\b{_MONTH}(?![a-z])(?:\s+{_DAY}\b)?(?:,?\s+{_YEAR}\b)?",
    re.IGNORECASE,
)
_ISO = re.compile(r"\b((?:19|20)\d\d)-(\d{2})(?:-(\d{2}))?\b")
_LONE_YEAR = re.compile(rf"\b{_YEAR}\b")
MAX_DATES = 8


@dataclass(frozen=True, slots=True)
class DateSpec:
    """A date at the precision the query named it; None = any."""

    year: int | None = None
    month: int | None = None
    day: int | None = None


def _spec(year: int | None, month: int | None, day: int | None) -> DateSpec:
    """A DateSpec without the parts that cannot be a date (a 13th month, a 45th day)."""
    if month is not None and not 1 <= month <= 12:
        month = day = None
    if day is not None and not 1 <= day <= 31:
        day = None
    return DateSpec(year, month, day)


def _valid(spec: DateSpec) -> bool:
    return (spec.year, spec.month, spec.day) != (None, None, None)


def _capitalised(text: str, at: int) -> bool:
    """A capital letter that is not just the start of a sentence ("in March", not "May
    I...")."""
    before = text[:at].rstrip()
    return text[at].isupper() and bool(before) and before[-1] not in ".?!:;\"'("


def named_dates(text: object) -> list[DateSpec]:
    """The dates `text` names, in order of appearance, without repeats (at most
    MAX_DATES)."""
    if not isinstance(text, str) or not text:
        return []
    text = text[:4000]
    found: list[tuple[int, DateSpec]] = []
    taken: list[tuple[int, int]] = []
    for m in _ISO.finditer(text):
        found.append(
            (
                m.start(),
                _spec(int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None),
            )
        )
        taken.append(m.span())
    for m in _NAMED.finditer(text):
        if any(a <= m.start() < b for a, b in taken):
            continue
        day_before, word, day_after, year = m.groups()
        day = day_before or day_after
        if word.lower() in _AMBIGUOUS and not (day or year or _capitalised(text, m.start(2))):
            continue
        found.append(
            (
                m.start(),
                _spec(
                    int(year) if year else None,
                    MONTH_NUMBERS[word.lower()],
                    int(day) if day else None,
                ),
            )
        )
        taken.append(m.span())
    for m in _LONE_YEAR.finditer(text):
        if not any(a <= m.start() < b for a, b in taken):
            found.append((m.start(), DateSpec(int(m.group(1)))))
    out: list[DateSpec] = []
    for _, spec in sorted(found, key=lambda item: item[0]):
        if _valid(spec) and spec not in out:
            out.append(spec)
    return out[:MAX_DATES]


def matches(spec: DateSpec, year: int, month: int, day: int) -> bool:
    """Whether a (UTC) calendar date falls on `spec`."""
    return (
        (spec.year is None or spec.year == year)
        and (spec.month is None or spec.month == month)
        and (spec.day is None or spec.day == day)
    )

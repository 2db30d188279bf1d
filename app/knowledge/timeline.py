"""Facts in time, with no I/O.

- `time_order`: candidates of a batch in the order their facts became true, so one batch
  and ten batches of the same conversation give the same facts and history.
- `is_older`: which of two statements is the older, like with like (event
  times when both have one, else when each was said); the older never overrides the
  newer: it is kept as history, fitted into the key's timeline (`fit_in_timeline`).
  (`older_than_target` is the issue-27 rule on `valid_from` alone.)
- `merge_sources`: provenance accumulates ([{session_id, seqs}], one entry per session).
- `parse_event_time`: the model's "when it happened", resolved against the message date.
- `version_at`: the version of an item in effect at a time (`as_of`), from its versions.
- `choose_shown`: which stored facts a decision prompt shows, most related first, within
  its budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

# versions that say what the item held (an invalidate/forget/delete/promote/confirm keeps
# the content of the version before it)
CONTENT_CHANGES = frozenset({"add", "update", "edit"})


def time_order(keys: Sequence[tuple[datetime, datetime, int]]) -> list[int]:
    """Indexes sorted by (valid from, stated at, first seq): the order candidates apply in."""
    return sorted(range(len(keys)), key=lambda i: (keys[i], i))


def older_than_target(candidate_from: datetime, target_from: datetime | None) -> bool:
    """The candidate became true before the target did (it may not override it)."""
    return target_from is not None and candidate_from < target_from


@dataclass(frozen=True, slots=True)
class Said:
    """A fact's times for comparing two statements like with like: when it
    became true, when it was said, and whether the first is an event time (known, not
    just the moment it was said or typed)."""

    valid_from: datetime
    said: datetime

    @property
    def event(self) -> bool:
        return self.valid_from != self.said


def said_of(valid_from: datetime | None, stated_at: datetime | None, created_at: datetime) -> Said:
    """An item's `Said`: a hand-written item was said when it was written."""
    said = stated_at or created_at
    return Said(valid_from or said, said)


def is_older(candidate: Said, target: Said) -> bool:
    """The candidate is the older statement (it may not override the target): by event
    times when both have one, else by when each was said (a hand-typed "resides
    in Vienna" with no event time no longer beats "I moved to Rome last week" said after
    it)."""
    if candidate.event and target.event:
        return candidate.valid_from < target.valid_from
    if candidate.said != target.said:
        return candidate.said < target.said
    return candidate.valid_from < target.valid_from


@dataclass(frozen=True, slots=True)
class Slot:
    """Where an older statement fits in a key's timeline: the fact whose validity it cuts
    (None: none held then), the fact that follows it and when that one began (its end)."""

    cut: Any | None
    successor: Any
    until: datetime


def fit_in_timeline(
    start: datetime, chain: Sequence[tuple[Any, datetime, datetime | None]]
) -> Slot:
    """The slot of a statement true from `start` in a chain of facts (id, valid_from,
    invalid_at) that replaced one another, the newest included: it ends where the first
    fact beginning after it begins, and cuts the fact holding at `start` (a
    late "I lived in Madrid" from day 75 ended at the newest home and overlapped two
    homes in between). A start after every fact's: it ends at once (the newer statement
    wins)."""
    ordered = sorted(chain, key=lambda f: (f[1], str(f[0])))
    later = [f for f in ordered if f[1] > start]
    holding = [f for f in ordered if f[1] <= start and (f[2] is None or start < f[2])]
    cut = holding[-1][0] if holding else None
    if later:
        return Slot(cut if cut != later[0][0] else None, later[0][0], later[0][1])
    newest = ordered[-1]
    return Slot(None, newest[0], start)


def merge_sources(*groups: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per session (first-seen order), its seqs sorted without duplicates."""
    by_session: dict[str, set[int]] = {}
    for group in groups:
        for entry in group:
            sid = str(entry.get("session_id") or "")
            by_session.setdefault(sid, set()).update(int(s) for s in entry.get("seqs") or [])
    return [{"session_id": sid or None, "seqs": sorted(seqs)} for sid, seqs in by_session.items()]


def parse_event_time(raw: str | None, stated: datetime) -> datetime | None:
    """The model's event time: an ISO date (midnight UTC) or date-time (naive = UTC); None
    when not given. Raises ValueError when it is not a date."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if len(text) == 10:
        day = date.fromisoformat(text)
        return datetime.combine(day, time(0, 0), tzinfo=UTC)
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def version_at(
    versions: Sequence[Any], at: datetime, *, created_at: datetime | None = None
) -> Any | None:
    """The version in effect at `at`: content versions in version order make a timeline
    where a version replaces every earlier one that took effect at or after its own
    `valid_from` (a correction rewrites that part of the past); the one whose start is the
    latest not after `at` wins. A version with no `valid_from` took effect at
    `created_at`. None when nothing had taken effect yet. (The item's end, `invalid_at`,
    is checked by the caller.)"""
    timeline: list[tuple[datetime, Any]] = []
    last_content: Any | None = None
    for v in sorted(versions, key=lambda v: v.version):
        if v.change in CONTENT_CHANGES:
            last_content = v
        elif last_content is None:
            last_content = v
        else:
            continue
        start = v.valid_from or created_at
        if start is None:
            continue
        timeline = [(s, x) for s, x in timeline if s < start]
        timeline.append((start, v))
    best: Any | None = None
    best_start: datetime | None = None
    for start, v in timeline:
        if start <= at and (best_start is None or start >= best_start):
            best, best_start = v, start
    return best


def choose_shown(
    all_ids: Sequence[str],
    tokens: Mapping[str, int],
    budget: int,
    same_key: Sequence[str],
    ranked: Sequence[Sequence[str]],
    related: Sequence[str] = (),
    subject: Sequence[str] = (),
) -> list[str]:
    """The stored facts a decision prompt shows, most related first, filling `budget`
    (a fixed count of 8 text matches left the contradicted fact out): every
    fact sharing a candidate's key (always, even past the budget); then the same
    subject's related attributes (`app.facts.policy.related_keys`); then the candidates'
    text matches round-robin (best first); then the rest of the same subject; then every
    other fact (`all_ids`, most important first), each while it fits."""
    chosen: dict[str, None] = dict.fromkeys(same_key)
    used = sum(tokens.get(i, 0) for i in chosen)

    def take(i: str) -> None:
        nonlocal used
        if i not in chosen and used + tokens.get(i, 0) <= budget:
            chosen[i] = None
            used += tokens.get(i, 0)

    for i in related:
        take(i)
    depth = max((len(r) for r in ranked), default=0)
    for k in range(depth):
        for r in ranked:
            if k < len(r):
                take(r[k])
    for i in subject:
        take(i)
    for i in all_ids:
        take(i)
    return list(chosen)

"""Automatic recall: which old messages a context build brings back. Pure: no I/O.

When a session (or one context request) turns recall on, the build searches the session's
swap with the newest user message (or a given query) and places the best hits between the
summaries and L1, in seq order, marked as recalled. The rules:

* Recall only spends what the rest of the context left free, and at most `share` of the
  budget: it is the first thing to shrink, and it never pushes anything else out.
* A hit comes with its whole tool group (the call and every result, as
  `app.memory.policy.group_units` forms them); a group that is not complete in what was
  loaded, or that shares a message with the context, is skipped.
* What the context already shows verbatim (L1, promoted) is never recalled again.
* At most `max_messages` messages, counting the partners a group brings along.
* The hits are taken best first; one that does not fit is skipped and the next ones are
  still tried.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.memory.policy import MessageRecord, group_units

DEFAULT_SHARE = 0.10
DEFAULT_MAX_MESSAGES = 10
MAX_SHARE = 0.5
MAX_MESSAGES = 50
# Below this many tokens a recall could not hold even a short message: no search is run.
MIN_RECALL_TOKENS = 32
# How far around a hit its tool group is looked for (seqs each side).
GROUP_REACH = 8


@dataclass(frozen=True, slots=True)
class RecallConfig:
    """A session's (or a request's) recall settings; `query` None = the newest user
    message's text."""

    enabled: bool = False
    share: float = DEFAULT_SHARE
    max_messages: int = DEFAULT_MAX_MESSAGES
    query: str | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.share) and 0 < self.share <= MAX_SHARE):
            raise ValueError(f"share must be in (0, {MAX_SHARE}]")
        if not (1 <= self.max_messages <= MAX_MESSAGES):
            raise ValueError(f"max_messages must be between 1 and {MAX_MESSAGES}")

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any] | None) -> RecallConfig:
        """From a validated config object (`app.context.schemas.RecallInput` dumped); None
        or an absent object: off."""
        if not stored:
            return cls()
        return cls(enabled=bool(stored.get("enabled", True)),
                   share=float(stored.get("share") or DEFAULT_SHARE),
                   max_messages=int(stored.get("max_messages") or DEFAULT_MAX_MESSAGES),
                   query=stored.get("query"))

    def tokens(self, budget: int, free: int) -> int:
        """Tokens recall may spend: its share of the budget, within what is free."""
        if not self.enabled:
            return 0
        return max(0, min(free, int(budget * self.share)))


@dataclass(frozen=True, slots=True)
class RecallHit:
    """A search result of the session: its seq and ranking score."""

    seq: int
    score: float


@dataclass(frozen=True, slots=True)
class Recalled:
    """What recall chose: seqs in order, each hit's score (partners brought along have
    none), and the tokens of the messages."""

    seqs: tuple[int, ...] = ()
    scores: Mapping[int, float] | None = None
    message_tokens: int = 0


def group_of(seq: int, records: Sequence[MessageRecord]) -> tuple[MessageRecord, ...] | None:
    """The complete tool group holding `seq` among `records` (consecutive seqs, in order),
    or None when it is not complete there (a call without all its results, or a result
    without its call)."""
    for unit in group_units(list(records)):
        if any(r.seq == seq for r in unit):
            calls = {i for r in unit for i in r.tool_use_ids}
            results = {i for r in unit for i in r.tool_result_ids}
            return unit if calls == results else None
    return None


def neighbourhood(hits: Sequence[RecallHit]) -> list[int]:
    """The seqs to load so that every hit's tool group can be formed."""
    return sorted({s for h in hits for s in range(max(1, h.seq - GROUP_REACH),
                                                  h.seq + GROUP_REACH + 1)})


def _runs(records: Sequence[MessageRecord]) -> list[list[MessageRecord]]:
    """Split records (seq order) into runs of consecutive seqs."""
    runs: list[list[MessageRecord]] = []
    for r in records:
        if runs and runs[-1][-1].seq + 1 == r.seq:
            runs[-1].append(r)
        else:
            runs.append([r])
    return runs


def choose(hits: Sequence[RecallHit], records: Sequence[MessageRecord], shown: set[int],
           tokens: int, max_messages: int,
           note_tokens: Callable[[Sequence[int]], int]) -> Recalled:
    """The hits (best first) to recall with their groups, within `tokens` including the
    note that announces them (`note_tokens(seqs)`), and at most `max_messages` messages.

    `records`: the loaded messages around the hits (`neighbourhood`), in seq order."""
    runs = _runs(sorted(records, key=lambda r: r.seq))
    run_of = {r.seq: run for run in runs for r in run}
    chosen: dict[int, MessageRecord] = {}
    scores: dict[int, float] = {}
    for hit in hits:
        if hit.seq in chosen or hit.seq in shown or hit.seq not in run_of:
            continue
        unit = group_of(hit.seq, run_of[hit.seq])
        if unit is None or any(r.seq in shown or r.seq in chosen for r in unit):
            continue
        if len(chosen) + len(unit) > max_messages:
            continue
        trial = {**chosen, **{r.seq: r for r in unit}}
        cost = sum(r.token_count for r in trial.values()) + note_tokens(sorted(trial))
        if cost > tokens:
            continue
        chosen = trial
        scores[hit.seq] = hit.score
    seqs = tuple(sorted(chosen))
    return Recalled(seqs=seqs, scores=scores,
                    message_tokens=sum(chosen[s].token_count for s in seqs))

"""Automatic recall: which old messages a context build brings back. Pure: no I/O.

When a session (or one context request) turns recall on, the build searches the session's
swap with the newest user message (or a given query) and places the best hits between the
summaries and L1, in seq order, marked as recalled. The rules:

* Recall only spends what the rest of the context left free, and at most `share` of the
  budget: it is the first thing to shrink, and it never pushes anything else out.
* Without a `share` (the default) recall adapts to how well its hits score: the best hits
  may take `AUTO_BASE_SHARE` of the budget whatever they score (the fixed default before),
  and the hits that score at least `AUTO_KEEP` times the best one may go on up to
  `AUTO_MAX_SHARE`. A question plainly about the past finds many such turns and gets them;
  one about the recent turns (which L1 shows, and the search leaves out) or one with a
  single clear answer takes few hits. What the hits leave of the allowance goes to the
  turns just before L1, newest first (`tail`): the recent window grows back by what the
  past did not need, so a question about the recent turns loses nothing. Without
  `max_messages` an adaptive recall takes up to `MAX_MESSAGES` messages, a fixed share
  `DEFAULT_MAX_MESSAGES`.
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
# The adaptive default (no `share` given): see the module docstring.
AUTO_BASE_SHARE = DEFAULT_SHARE
AUTO_MAX_SHARE = MAX_SHARE
AUTO_KEEP = 0.3
# Below this many tokens a recall could not hold even a short message: no search is run.
MIN_RECALL_TOKENS = 32
# How far around a hit its tool group is looked for (seqs each side).
GROUP_REACH = 8


@dataclass(frozen=True, slots=True)
class RecallConfig:
    """A session's (or a request's) recall settings; `query` None = the newest user
    message's text, `share` None = adaptive, `max_messages` None = the default of the
    share's kind."""

    enabled: bool = False
    share: float | None = None
    max_messages: int | None = None
    query: str | None = None

    def __post_init__(self) -> None:
        if self.share is not None and not (
            math.isfinite(self.share) and 0 < self.share <= MAX_SHARE
        ):
            raise ValueError(f"share must be in (0, {MAX_SHARE}]")
        if self.max_messages is not None and not (1 <= self.max_messages <= MAX_MESSAGES):
            raise ValueError(f"max_messages must be between 1 and {MAX_MESSAGES}")

    @property
    def adaptive(self) -> bool:
        """No fixed share: the allowance follows the hits' scores."""
        return self.share is None

    @property
    def message_cap(self) -> int:
        """Most messages recalled, tool partners included."""
        if self.max_messages is not None:
            return self.max_messages
        return MAX_MESSAGES if self.adaptive else DEFAULT_MAX_MESSAGES

    def keep(self, budget: int, free: int) -> tuple[int, float] | None:
        """The adaptive rule for `choose`: past this many tokens only hits scoring at
        least this share of the best one are taken (None: a fixed share, no rule)."""
        if not self.adaptive or not self.enabled:
            return None
        return max(0, min(free, int(budget * AUTO_BASE_SHARE))), AUTO_KEEP

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any] | None) -> RecallConfig:
        """From a validated config object (`app.context.schemas.RecallInput` dumped); None
        or an absent object: off."""
        if not stored:
            return cls()
        share, cap = stored.get("share"), stored.get("max_messages")
        return cls(
            enabled=bool(stored.get("enabled", True)),
            share=float(share) if share is not None else None,
            max_messages=int(cap) if cap is not None else None,
            query=stored.get("query"),
        )

    def tokens(self, budget: int, free: int) -> int:
        """Tokens recall may spend: its share of the budget (adaptive: the most it may
        take, `AUTO_MAX_SHARE`), within what is free."""
        if not self.enabled:
            return 0
        share = AUTO_MAX_SHARE if self.share is None else self.share
        return max(0, min(free, int(budget * share)))


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
    return sorted(
        {s for h in hits for s in range(max(1, h.seq - GROUP_REACH), h.seq + GROUP_REACH + 1)}
    )


def _runs(records: Sequence[MessageRecord]) -> list[list[MessageRecord]]:
    """Split records (seq order) into runs of consecutive seqs."""
    runs: list[list[MessageRecord]] = []
    for r in records:
        if runs and runs[-1][-1].seq + 1 == r.seq:
            runs[-1].append(r)
        else:
            runs.append([r])
    return runs


def choose(
    hits: Sequence[RecallHit],
    records: Sequence[MessageRecord],
    shown: set[int],
    tokens: int,
    max_messages: int,
    note_tokens: Callable[[Sequence[int]], int],
    keep: tuple[int, float] | None = None,
) -> Recalled:
    """The hits (best first) to recall with their groups, within `tokens` including the
    note that announces them (`note_tokens(seqs)`), and at most `max_messages` messages.
    `keep` = (tokens, ratio): past that many tokens, only hits scoring at least `ratio`
    times the best hit's score are taken (`RecallConfig.keep`).

    `records`: the loaded messages around the hits (`neighbourhood`), in seq order."""
    runs = _runs(sorted(records, key=lambda r: r.seq))
    run_of = {r.seq: run for run in runs for r in run}
    chosen: dict[int, MessageRecord] = {}
    scores: dict[int, float] = {}
    best = max((h.score for h in hits), default=0.0)
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
        if keep is not None and cost > keep[0] and hit.score < keep[1] * best:
            continue
        chosen = trial
        scores[hit.seq] = hit.score
    seqs = tuple(sorted(chosen))
    return Recalled(
        seqs=seqs, scores=scores, message_tokens=sum(chosen[s].token_count for s in seqs)
    )


def tail(
    chosen: Recalled,
    records: Sequence[MessageRecord],
    shown: set[int],
    tokens: int,
    max_messages: int,
    note_tokens: Callable[[Sequence[int]], int],
) -> Recalled:
    """`chosen` plus the newest of `records` (the turns just before L1, in seq order) that
    still fit `tokens` (the note included) and `max_messages`, newest first, in whole tool
    groups, passing over those chosen already; it stops at the first that does not fit,
    is shown, or whose group is not complete in `records` (the tail stays one run, next
    to L1)."""
    picked = set(chosen.seqs)
    cost = chosen.message_tokens
    units = group_units(sorted(records, key=lambda r: r.seq))
    added: list[MessageRecord] = []
    for unit in reversed(units):
        calls = {i for r in unit for i in r.tool_use_ids}
        results = {i for r in unit for i in r.tool_result_ids}
        if any(r.seq in picked for r in unit):
            continue  # recalled already as a hit (or a hit's partner)
        if calls != results or any(r.seq in shown for r in unit):
            break
        extra = sum(r.token_count for r in unit)
        trial = sorted([*picked, *(r.seq for r in added), *(r.seq for r in unit)])
        if len(trial) > max_messages or cost + extra + note_tokens(trial) > tokens:
            break
        added.extend(unit)
        cost += extra
    if not added:
        return chosen
    seqs = tuple(sorted([*chosen.seqs, *(r.seq for r in added)]))
    return Recalled(seqs=seqs, scores=chosen.scores, message_tokens=cost)

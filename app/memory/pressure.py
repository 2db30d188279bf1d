"""When a session needs background compression. Pure: no I/O.

A session is *busy* when its stored memory usage (ROM + Kernel + L2 + promoted + L1
tokens over the budget) reaches `busy_usage` (0.70) or L1 holds more than
`l1_max_messages`. An append enqueues a compression when it *crosses* one of those lines,
or when it starts a new user turn while the session is busy (the turn being answered is
protected, so a new turn is what makes older messages compressible again). Sessions that
stay busy without such an event are found by the cron pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.memory.policy import MemoryConfig


@dataclass(frozen=True)
class Pressure:
    """A session's memory load."""

    budget: int
    memory_tokens: int
    l1_count: int
    l1_max: int

    @property
    def usage(self) -> float:
        return self.memory_tokens / self.budget if self.budget > 0 else 0.0


def pressure_from_row(row: Mapping[str, Any]) -> Pressure:
    """Build from `app.jobs.repository.pressure`'s row."""
    cfg = MemoryConfig.from_stored(row["config"])
    l1_count = max(0, int(row["last_seq"]) - int(row["l1_start_seq"]) + 1)
    return Pressure(
        budget=cfg.budget,
        memory_tokens=int(row["fixed_tokens"]) + int(row["l1_tokens"]),
        l1_count=l1_count,
        l1_max=cfg.l1_max_messages,
    )


def is_busy(p: Pressure, busy_usage: float) -> bool:
    """Compression is due (or will be once the protected turn moves on)."""
    return p.usage >= busy_usage or p.l1_count > p.l1_max


# A job in these states covers this append too: a queued one plans only when it runs.
# Enqueueing again would only cost a transaction and a Redis call. (A running job may have
# planned already, so a new turn still enqueues; arq keeps one job per session.)
JOB_COVERS = frozenset({"pending"})


def append_trigger(
    after: Pressure,
    *,
    added_tokens: int,
    added_messages: int,
    new_user_turn: bool,
    busy_usage: float,
) -> str | None:
    """The reason an append should enqueue compression, or None."""
    before = Pressure(
        after.budget,
        after.memory_tokens - added_tokens,
        after.l1_count - added_messages,
        after.l1_max,
    )
    if before.usage < busy_usage <= after.usage:
        return "usage"
    if before.l1_count <= after.l1_max < after.l1_count:
        return "l1_overflow"
    if new_user_turn and is_busy(after, busy_usage):
        return "new_turn"
    return None

"""Project-memory eviction policy (pure, no I/O).

Seed (tiered-memory-design.md ``ProjectMemoryStore._maybe_evict``): when a
project holds more than ``max_items`` items, sort all of them by importance
ascending then age (oldest first) and delete the bottom 10%.

Decisions (spec silent):
- "10%" is ``floor(count * fraction)`` as in the seed (1,001 items -> 100
  evicted), but never fewer than ``count - max_items`` so that a small
  ``max_items`` (where 10% rounds to 0) still brings the project back to its cap.
- Ties in importance and ``created_at`` are broken by ``id`` ascending so the
  choice is deterministic and the SQL version selects exactly the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime

DEFAULT_MAX_ITEMS = 1000
DEFAULT_EVICT_FRACTION = 0.10


@dataclass(frozen=True, slots=True)
class EvictionCandidate:
    """What the policy needs to know about one item."""

    id: Hashable
    importance: float
    created_at: datetime


def eviction_count(
    count: int, max_items: int = DEFAULT_MAX_ITEMS, fraction: float = DEFAULT_EVICT_FRACTION
) -> int:
    """How many items to evict from a project holding ``count`` items (0 if within the cap)."""
    if max_items < 0 or not 0 < fraction <= 1:
        raise ValueError("max_items must be >= 0 and fraction in (0, 1]")
    if count <= max_items:
        return 0
    return min(count, max(math.floor(count * fraction), count - max_items))


def eviction_sort_key(c: EvictionCandidate) -> tuple[float, datetime, str]:
    """Lowest importance first, then oldest, then id (the SQL ORDER BY uses the same key)."""
    return (c.importance, c.created_at, str(c.id))


def select_evictions(
    items: Sequence[EvictionCandidate],
    max_items: int = DEFAULT_MAX_ITEMS,
    fraction: float = DEFAULT_EVICT_FRACTION,
) -> list[Hashable]:
    """Ids of the items to evict, lowest-importance oldest first."""
    n = eviction_count(len(items), max_items, fraction)
    if n == 0:
        return []
    return [c.id for c in sorted(items, key=eviction_sort_key)[:n]]

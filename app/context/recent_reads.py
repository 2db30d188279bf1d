"""Recent recall reads (`app.context.swap_recall`): an LRU whose entries expire, keyed by
(tenant, session, ...), one per kind of read in the process's caches (`app.state.Caches`).
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Collection
from typing import Any


class RecentReads:
    """Recent recall reads (the searches of the last builds, or the tool groups around
    their hits), keyed by (tenant, session, ...): LRU, entries live `SEARCH_CACHE_SECONDS`;
    owned by the process's lifespan state (`app.state.Caches`).

    An agent rebuilds its context after every tool round of a turn, with the same newest
    user message and the same swap: the search's answer is the same, since results come
    only from before L1 (L1 is excluded as a range from its first message on, so what
    the turn appends does not change the question) and messages never change once
    stored. A compression moves L1's start, and a promotion changes the excluded seqs:
    both change the key. Only the scope's statistics (N, average length) drift with the
    appends, which the entry's lifetime bounds."""

    def __init__(self, size: int, seconds: float) -> None:
        self.size, self.seconds = size, seconds
        self._items: OrderedDict[tuple[Any, ...], tuple[float, list[Any]]] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> list[Any] | None:
        item = self._items.get(key)
        if item is None or time.monotonic() - item[0] > self.seconds:
            return None
        self._items.move_to_end(key)
        return item[1]

    def put(self, key: tuple[Any, ...], found: list[Any]) -> None:
        self._items[key] = (time.monotonic(), found)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def sessions(self) -> set[tuple[uuid.UUID, uuid.UUID]]:
        """The (tenant, session) pairs with entries."""
        return {(k[0], k[1]) for k in self._items}

    def forget(self, tenant: uuid.UUID, sessions: Collection[uuid.UUID]) -> None:
        """Drop the reads of `sessions` (of `tenant`)."""
        gone = set(sessions)
        for key in [k for k in self._items if k[0] == tenant and k[1] in gone]:
            del self._items[key]


SEARCH_CACHE_SIZE = 1000
SEARCH_CACHE_SECONDS = 300.0


class RecallSearches(RecentReads):
    """Automatic recall's searches (`app.context.swap_recall`)."""


class RecallGroups(RecentReads):
    """The tool groups around automatic recall's hits."""

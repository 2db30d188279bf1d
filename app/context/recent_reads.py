"""Recent recall reads (`app.context.swap_recall`): an LRU whose entries expire, keyed by
(tenant, session, ...), one per kind of read in the process's caches (`app.state.Caches`).
"""

from __future__ import annotations

from typing import Any

from app.core.session_lru import SessionLRU


class RecentReads(SessionLRU[list[Any]]):
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
        super().__init__(size, seconds)


SEARCH_CACHE_SIZE = 1000
SEARCH_CACHE_SECONDS = 300.0


class RecallSearches(RecentReads):
    """Automatic recall's searches (`app.context.swap_recall`)."""


class RecallGroups(RecentReads):
    """The tool groups around automatic recall's hits."""

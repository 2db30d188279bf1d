"""Bounded in-process memory tier: an LRU by bytes in front of PostgreSQL (pure, no I/O).

Safe for one process: every method holds one `threading.Lock` and never awaits, so both
threads and asyncio tasks see a consistent map. Across processes it is kept coherent by the
service publishing invalidations (Redis pub/sub) that call `invalidate`.

Versions make it race-proof: an invalidation for version v sets a *floor*, and a later
`put` of an older version (a slow read that started before the write) is refused, so a stale
value cannot be re-cached after its invalidation arrived. Versions are globally increasing
(one PostgreSQL sequence), so the floor also holds across delete + re-create.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

# Approximate per-entry bookkeeping (dict slot, tuple key, object headers) so that a flood of
# tiny values cannot grow the process far past the byte budget.
ENTRY_OVERHEAD = 256
MAX_FLOORS = 65_536


@dataclass(slots=True)
class TierStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    bytes: int = 0
    items: int = 0
    max_bytes: int = 0


@dataclass(slots=True)
class _Slot:
    value: Any
    nbytes: int
    version: int


class MemoryTier:
    """LRU map of key -> (value, version), bounded by the sum of value sizes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._map: OrderedDict[Hashable, _Slot] = OrderedDict()
        self._floors: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()
        self._bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, key: Hashable) -> tuple[Any, int] | None:
        """Return (value, version) and mark it most recently used, or None."""
        with self._lock:
            slot = self._map.get(key)
            if slot is None:
                self.misses += 1
                return None
            self._map.move_to_end(key)
            self.hits += 1
            return slot.value, slot.version

    def put(self, key: Hashable, value: Any, nbytes: int, version: int) -> bool:
        """Cache `value` at `version`; False when too big, or older than what is known."""
        cost = int(nbytes) + ENTRY_OVERHEAD
        with self._lock:
            if version < self._floors.get(key, 0):
                return False
            old = self._map.get(key)
            if old is not None and old.version > version:
                return False
            if cost > self.max_bytes:
                self._drop(key)
                return False
            self._drop(key)
            while self._bytes + cost > self.max_bytes and self._map:
                _, evicted = self._map.popitem(last=False)
                self._bytes -= evicted.nbytes
                self.evictions += 1
            self._map[key] = _Slot(value, cost, version)
            self._bytes += cost
            return True

    def invalidate(self, key: Hashable, version: int | None = None) -> None:
        """Forget `key`; with `version`, also refuse later puts older than it."""
        with self._lock:
            self._drop(key)
            if version is not None:
                if version > self._floors.get(key, 0):
                    self._floors[key] = version
                if key in self._floors:
                    self._floors.move_to_end(key)
                while len(self._floors) > MAX_FLOORS:
                    self._floors.popitem(last=False)

    def clear(self) -> None:
        """Drop everything (e.g. after missing invalidations while Redis was away)."""
        with self._lock:
            self._map.clear()
            self._bytes = 0

    def drop_where(self, pred: Callable[[Hashable], bool]) -> int:
        """Forget every key `pred` holds true for (an erased scope); how many went."""
        with self._lock:
            gone = [k for k in self._map if pred(k)]
            for k in gone:
                self._drop(k)
            return len(gone)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._map

    def __len__(self) -> int:
        with self._lock:
            return len(self._map)

    def stats(self) -> TierStats:
        with self._lock:
            return TierStats(
                self.hits, self.misses, self.evictions, self._bytes, len(self._map), self.max_bytes
            )

    def _drop(self, key: Hashable) -> None:
        slot = self._map.pop(key, None)
        if slot is not None:
            self._bytes -= slot.nbytes

"""An in-process LRU keyed by (tenant, session, ...) that erasure can empty per session
(pure: no I/O). The caches of the process's lifespan state (`app.state.Caches`) are
built on it: memory's stand-ins and the context's recent recall reads."""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Collection
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class SessionLRU(Generic[V]):
    """At most `size` entries, least recently used dropped first; with `seconds`, an
    entry older than that reads as absent. Keys start with (tenant id, session id)."""

    def __init__(self, size: int, seconds: float | None = None) -> None:
        self.size, self.seconds = size, seconds
        self._items: OrderedDict[tuple[Any, ...], tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[Any, ...]) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        if self.seconds is not None and time.monotonic() - item[0] > self.seconds:
            return None
        self._items.move_to_end(key)
        return item[1]

    def put(self, key: tuple[Any, ...], value: V) -> None:
        self._items[key] = (time.monotonic(), value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def sessions(self) -> set[tuple[uuid.UUID, uuid.UUID]]:
        """The (tenant, session) pairs with entries."""
        return {(k[0], k[1]) for k in self._items}

    def forget(self, tenant: uuid.UUID, sessions: Collection[uuid.UUID]) -> None:
        """Drop the entries of `sessions` (of `tenant`)."""
        gone = set(sessions)
        for key in [k for k in self._items if k[0] == tenant and k[1] in gone]:
            del self._items[key]

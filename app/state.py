"""The application's typed state: what the lifespan opens and every request reads.

`create_app`'s lifespan builds one `AppState` (its two asyncpg pools, Redis,
queue, LLM client, the process's caches and its parts, see `app.wiring`) and keeps it at
`app.state.loom`. Everything reads it one way, `app_state(app)`: a route or dependency with
`app_state(request.app)` (a plain call: no dependency to resolve on the hot paths), the MCP
and tool contexts, tests and scripts with the app they hold.

The parts the domains own (the key cache, the shared-memory runtime, the tool catalog, the
hooks each request path runs) are `Parts`, each under its class: a domain reads its own,
`state.parts[KeyCache]`, and this module knows none of their classes, so every domain may
read the state without the state depending on any (`docs/architecture.md`).

The arq worker builds a `WorkerState` in its startup (`workers.settings`) with the same
settings and configuration (`app.wiring.configure`); a job reads it with
`worker_state(ctx)`. It keeps no caches: none of its jobs reads one (the caches serve
requests: recall, stand-ins, rerank, shared memory's tier).

Every cache of a process is one of its `Caches`, which live in the API's state; no
module keeps one (`tests/core/test_module_caches.py`). Erasure forgets an erased
session's entries through `Caches.forget`, over every cache `app.wiring.caches` assembles.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from app.core import pg
from app.core.started import started_state

if TYPE_CHECKING:
    import asyncpg
    from redis.asyncio import Redis

    from app.core.config import Settings
    from app.core.queue import Queue
    from app.llm.client import LLMClient

T = TypeVar("T")


class Parts:
    """Objects of a process, each under its class (two of one class are refused):
    `parts[KeyCache]` is the process's key cache, typed as one."""

    __slots__ = ("_by_class",)

    def __init__(self, *parts: object) -> None:
        self._by_class: dict[type, object] = {}
        for part in parts:
            if type(part) in self._by_class:
                raise ValueError(f"two parts of class {type(part).__name__}")
            self._by_class[type(part)] = part

    def __getitem__(self, kind: type[T]) -> T:
        return cast(T, self._by_class[kind])

    def __iter__(self) -> Iterator[object]:
        return iter(self._by_class.values())

    def __len__(self) -> int:
        return len(self._by_class)


class Forgets(Protocol):
    """A cache of a process: `forget` drops what it holds of erased sessions."""

    def forget(self, tenant: uuid.UUID, sessions: Collection[uuid.UUID]) -> None: ...


class Caches(Parts):
    """The process's caches (built by `app.wiring.caches`, the same in the API process and
    the worker), each under its class: `caches[StandIns]`. `forget` goes through all."""

    __slots__ = ()

    def __init__(self, *caches: Forgets) -> None:
        super().__init__(*caches)

    def forget(self, tenant: uuid.UUID, sessions: Collection[uuid.UUID]) -> None:
        """Drop every cached entry of `sessions` (of `tenant`): erasure's one call."""
        if sessions:
            for cache in self:
                cast(Forgets, cache).forget(tenant, sessions)


@dataclass(slots=True)
class AppState:
    settings: Settings
    pg: asyncpg.Pool  # the hot paths' pool (app.core.pg)
    db: asyncpg.Pool  # every other route's (app.core.db)
    redis: Redis
    queue: Queue
    llm: LLMClient | None  # summaries/rerank; None without a configured LLM
    caches: Caches
    # the key cache, the shared-memory runtime, the built-in tools, the request paths' hooks
    parts: Parts

    def connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection of the hot paths' pool (`app.core.pg.connection`), waiting at most
        `LOOM_DB_POOL_TIMEOUT_SECONDS` for one."""
        return pg.connection(self.pg, self.settings.db_pool_timeout_seconds)

    def db_connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection of the other routes' pool (`app.core.db`: `DbDep`, `transaction`)."""
        return pg.connection(self.db, self.settings.db_pool_timeout_seconds)


@dataclass(slots=True)
class WorkerState:
    """What an arq worker's jobs share: built once in its startup (`workers.settings`),
    kept in arq's ctx under `WORKER_STATE`, read with `worker_state(ctx)`."""

    settings: Settings
    db: asyncpg.Pool  # the worker's pool (app.core.db)
    redis: Redis
    queue: Queue
    llm: LLMClient | None  # None = heuristic summaries
    # what the busy-session pass remembers between its runs, per worker start
    # (app.memory.tasks.compress_busy_sessions)
    cron_state: dict[str, Any] = field(default_factory=dict)

    def db_connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection of the worker's pool, waiting at most LOOM_DB_POOL_TIMEOUT_SECONDS."""
        return pg.connection(self.db, self.settings.db_pool_timeout_seconds)


WORKER_STATE = "loom"


def worker_state(ctx: MutableMapping[str, Any]) -> WorkerState:
    """The worker's state, from the ctx arq passes every job."""
    return cast(WorkerState, ctx[WORKER_STATE])


def app_state(app: Any) -> AppState:
    """The state of a started app (its lifespan is running)."""
    return cast(AppState, started_state(app))

"""The application's typed state: what the lifespan opens and every request reads.

`create_app`'s lifespan builds one `AppState` (engine, sessionmakers, asyncpg pool, Redis,
queue, key cache, shared-memory runtime, LLM client, the process's caches, and the hooks
other domains join requests with, see `app.wiring`) and keeps it at `app.state.loom`.
Everything reads it one way, `app_state(app)`: a route or dependency with
`app_state(request.app)` (a plain call: no dependency to resolve on the hot paths), the MCP
and tool contexts, tests and scripts with the app they hold.

The arq worker builds a `WorkerState` in its startup (`workers.settings`) with the same
settings, configuration (`app.wiring.configure`) and caches (`app.wiring.caches`); a job
reads it with `worker_state(ctx)`.

Every cache of a process is a field of `Caches`, which lives in one of these states; no
module keeps one (`tests/core/test_module_caches.py`). Erasure forgets an erased
session's entries through `Caches.forget`, the registry `app.wiring.caches` assembles.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Protocol, cast

from fastapi import Depends, Request

from app.core import pg
from app.core.started import started_state

if TYPE_CHECKING:
    import asyncpg
    from redis.asyncio import Redis
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

    from app.auth.cache import KeyCache
    from app.context.blocks import BlockProvider
    from app.context.builder import FinishBuild
    from app.context.recent_reads import RecentReads
    from app.core.config import Settings
    from app.core.queue import Queue
    from app.llm.client import LLMClient
    from app.manifests.replay import BlockReplay
    from app.memory.aggregate import StandIns
    from app.messages.hooks import AppendHooks
    from app.search.service import RerankCache
    from app.sessions.service import CreateHook, EndHook
    from app.shared_memory.runtime import SharedMemoryRuntime
    from app.tools.catalog import ToolCatalog


@dataclass(frozen=True, slots=True)
class Hooks:
    """The hooks each request path runs: declared by the domain that runs them (`messages`,
    `sessions`, `context`), implemented by others, joined in `app.wiring`."""

    session_created: tuple[CreateHook, ...]
    session_ended: tuple[EndHook, ...]
    append: AppendHooks
    context_blocks: tuple[BlockProvider, ...]
    context_built: FinishBuild
    # the providers' blocks rendered again by block name, for a replay (`app.manifests`)
    block_replays: Mapping[str, BlockReplay]


class Forgets(Protocol):
    """A cache of a process: `forget` drops what it holds of erased sessions."""

    def forget(self, tenant: uuid.UUID, sessions: Collection[uuid.UUID]) -> None: ...


@dataclass(frozen=True, slots=True)
class Caches:
    """The process's caches (built by `app.wiring.caches`, the same in the API process and
    the worker). `registry` lists every one of them: `forget` goes through it."""

    stand_ins: StandIns  # heuristic stand-ins of L1 overflow (app.memory.aggregate)
    recall_searches: RecentReads  # automatic recall's searches (app.context.swap_recall)
    recall_groups: RecentReads  # the tool groups around their hits
    rerank: RerankCache  # rerank scores in Redis, and its backoff (app.search.service)
    registry: tuple[Forgets, ...]

    def forget(self, tenant: uuid.UUID, sessions: Collection[uuid.UUID]) -> None:
        """Drop every cached entry of `sessions` (of `tenant`): erasure's one call."""
        if sessions:
            for cache in self.registry:
                cache.forget(tenant, sessions)


@dataclass(slots=True)
class AppState:
    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    read_sessionmaker: async_sessionmaker[AsyncSession]
    pg: asyncpg.Pool  # the hot paths' pool (app.core.pg)
    redis: Redis
    queue: Queue
    key_cache: KeyCache
    shared_memory: SharedMemoryRuntime
    llm: LLMClient | None  # summaries/rerank; None without a configured LLM
    caches: Caches
    tools: ToolCatalog  # the built-in tools (app.tools.catalog)
    hooks: Hooks

    def connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection of the hot paths' pool (`app.core.pg.connection`), waiting at most
        `LOOM_DB_POOL_TIMEOUT_SECONDS` for one."""
        return pg.connection(self.pg, self.settings.db_pool_timeout_seconds)


@dataclass(slots=True)
class WorkerState:
    """What an arq worker's jobs share: built once in its startup (`workers.settings`),
    kept in arq's ctx under `WORKER_STATE`, read with `worker_state(ctx)`."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: Redis
    queue: Queue
    llm: LLMClient | None  # None = heuristic summaries
    caches: Caches
    # what the busy-session pass remembers between its runs, per worker start
    # (app.memory.tasks.compress_busy_sessions)
    cron_state: dict[str, Any] = field(default_factory=dict)


WORKER_STATE = "loom"


def worker_state(ctx: MutableMapping[str, Any]) -> WorkerState:
    """The worker's state, from the ctx arq passes every job."""
    return cast(WorkerState, ctx[WORKER_STATE])


def app_state(app: Any) -> AppState:
    """The state of a started app (its lifespan is running)."""
    return cast(AppState, started_state(app))


async def _state_of(request: Request) -> AppState:
    return app_state(request.app)


# Only app.facts.router still takes the state as a dependency (issue 37's module, edited
# concurrently): remove this alias once it reads `app_state(request.app)` too.
StateDep = Annotated[AppState, Depends(_state_of)]

"""The application's typed state: what the lifespan opens and every request reads.

`create_app`'s lifespan builds one `AppState` (engine, sessionmakers, asyncpg pool, Redis,
queue, key
cache, shared-memory runtime, LLM client, and the hooks other domains join requests
with, see `app.wiring`) and keeps it at `app.state.loom`. Routes read it through
`StateDep`; code without a request (tests, scripts) uses `app_state(app)`.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, cast

from fastapi import Depends, Request

from app.core import pg
from app.core.started import started_state

if TYPE_CHECKING:
    import asyncpg
    from redis.asyncio import Redis
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

    from app.auth.cache import KeyCache
    from app.context.blocks import BlockProvider
    from app.core.config import Settings
    from app.core.queue import Queue
    from app.messages.hooks import AppendHooks
    from app.sessions.service import CreateHook
    from app.shared_memory.runtime import SharedMemoryRuntime


@dataclass(frozen=True, slots=True)
class Hooks:
    """The hooks each request path runs: declared by the domain that runs them (`messages`,
    `sessions`, `context`), implemented by others, joined in `app.wiring`."""

    session_created: tuple[CreateHook, ...]
    append: AppendHooks
    context_blocks: tuple[BlockProvider, ...]


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
    llm: Any  # app.llm client for summaries/rerank, None without a configured LLM
    hooks: Hooks

    def connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection of the hot paths' pool (`app.core.pg.connection`), waiting at most
        `LOOM_DB_POOL_TIMEOUT_SECONDS` for one."""
        return pg.connection(self.pg, self.settings.db_pool_timeout_seconds)


def app_state(app: Any) -> AppState:
    """The state of a started app (its lifespan is running)."""
    return cast(AppState, started_state(app))


async def get_state(request: Request) -> AppState:
    return app_state(request.app)


StateDep = Annotated[AppState, Depends(get_state)]

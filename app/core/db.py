"""A route's way to the database: one asyncpg connection of the app's pool in the
request's transaction (`DbDep`), and the same for work outside a request (`transaction`).

Every domain runs SQL text on an asyncpg connection and reads typed rows (docs/
architecture.md, "How each domain reaches the database"); SQLAlchemy and SQLModel describe
the schema for the migrations only. A process has two pools of asyncpg connections
(`app.core.pg.create_pool`): the hot paths' (`AppState.pg`: the append, the context build,
auth, shared-memory reads), whose connections plan every statement generically, and this
one (`AppState.db`, the worker's `WorkerState.db`) for everything else, planning as
PostgreSQL chooses, since its statements are composed from filters whose selectivity
differs from call to call. Both have the same bounds: a connection waits at most
`LOOM_DB_POOL_TIMEOUT_SECONDS` and never past the request's deadline (`app.core.deadline`),
and one that failed at the connection level is cut, never pooled again (`pg.connection`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, TypeVar

import asyncpg
from fastapi import Request

from app.core.started import started_state

log = logging.getLogger("loom.db")

AfterCommit = Callable[[], Awaitable[None]]
# what opens a pooled connection (`AppState.db_connection`, `WorkerState.db_connection`)
Connect = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


class LoomConnection(asyncpg.Connection):
    """The pools' connection class: an asyncpg connection that keeps what must run once
    its transaction has committed (`after_commit`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loom_after_commit: list[AfterCommit] = []


def after_commit(conn: asyncpg.Connection, fn: AfterCommit) -> None:
    """Run `fn` once the transaction `conn` is in has committed (e.g. publish a change)."""
    conn.loom_after_commit.append(fn)


async def run_after_commit(conn: asyncpg.Connection) -> None:
    pending: list[AfterCommit] = conn.loom_after_commit
    fns = list(pending)
    pending.clear()
    for fn in fns:
        try:
            await fn()
        except Exception:  # a post-commit side effect must never fail the request
            log.exception("after-commit callback failed")


F = TypeVar("F", bound=Callable[..., Any])


def read_only(fn: F) -> F:
    """Mark a route whose every statement is a read (or a single self-contained write):
    its connection runs in autocommit, saving a BEGIN and a COMMIT round trip."""
    setattr(fn, "__loom_read_only__", True)  # noqa: B010 (a mark on any callable)
    return fn


@asynccontextmanager
async def transaction(connect: Connect) -> AsyncIterator[asyncpg.Connection]:
    """A pooled connection in a transaction that commits on success and rolls back on
    error; its `after_commit` callbacks run once it has committed. The wait for the
    connection and all its work end by the request's database deadline (`pg.connection`)."""
    async with connect() as conn:
        conn.loom_after_commit.clear()
        try:
            async with conn.transaction():
                yield conn
        except BaseException:
            conn.loom_after_commit.clear()
            raise
        await run_after_commit(conn)


class _Databases(Protocol):
    """What `get_db` takes of the started app (`app.state.AppState`)."""

    def db_connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]: ...


@asynccontextmanager
async def request_connection(request: Request) -> AsyncIterator[asyncpg.Connection]:
    """A request's connection (`transaction`; autocommit for `read_only` routes): what
    `app.auth.deps.DbDep` gives a route, once its caller is authenticated."""
    state: _Databases = started_state(request.app)
    if getattr(request.scope.get("endpoint"), "__loom_read_only__", False):
        async with state.db_connection() as conn:
            conn.loom_after_commit.clear()
            yield conn
            await run_after_commit(conn)
        return
    async with transaction(state.db_connection) as conn:
        yield conn

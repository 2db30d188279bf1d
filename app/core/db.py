"""Database engine, sessions, and the request-scoped session dependency."""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

log = logging.getLogger("loom.db")

AfterCommit = Callable[[], Awaitable[None]]


def create_engine(url: str, pool_size: int = 10) -> AsyncEngine:
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size * 2,
        pool_pre_ping=False,
        connect_args={"server_settings": {"application_name": "loom-memory"},
                      "command_timeout": 30, "timeout": 5},
    )


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


def after_commit(db: AsyncSession, fn: AfterCommit) -> None:
    """Run `fn` once the request's transaction has committed (e.g. enqueue a job)."""
    db.info.setdefault("after_commit", []).append(fn)


async def run_after_commit(db: AsyncSession) -> None:
    for fn in db.info.pop("after_commit", []):
        try:
            await fn()
        except Exception:  # a post-commit side effect must never fail the request
            log.exception("after-commit callback failed")


def create_read_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions for read-only routes: autocommit, so no BEGIN/COMMIT round trips."""
    return async_sessionmaker(engine.execution_options(isolation_level="AUTOCOMMIT"),
                              expire_on_commit=False, autoflush=False)


def read_only(fn: Any) -> Any:
    """Mark a route whose every statement is a read (or a single self-contained write):
    its DbDep session runs in autocommit, saving a BEGIN and a COMMIT round trip."""
    fn.__loom_read_only__ = True
    return fn


async def get_db(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's session: commits on success, rolls back on error."""
    maker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    if getattr(request.scope.get("endpoint"), "__loom_read_only__", False):
        maker = getattr(request.app.state, "read_sessionmaker", maker)
    async with maker() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise
    await run_after_commit(session)


# scope="function": commit before the response is sent, so a client never reads before
# its write is visible and a failed commit is reported as an error.
DbDep = Annotated[AsyncSession, Depends(get_db, scope="function")]

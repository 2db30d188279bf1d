"""Database engine, sessions, and the request-scoped session dependency."""

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import Depends, Request
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.util import await_

from app.core import deadline
from app.core.config import Settings
from app.core.db_errors import is_connection_error
from app.core.pg import CITUS_SQL, citus_known, connection_bounds, note_citus
from app.core.started import started_state

log = logging.getLogger("loom.db")

AfterCommit = Callable[[], Awaitable[None]]


# a connection closed by the pool gets this long to say goodbye, then it is cut
CLOSE_TIMEOUT = 0.5


def create_engine(
    url: str,
    pool_size: int = 10,
    settings: Settings | None = None,
    *,
    max_overflow: int | None = None,
) -> AsyncEngine:
    """The engine with a bounded database time (see `Settings.db_*_seconds`) and the
    disconnect handling of `install_disconnect_handling`. `settings` defaults to the
    process settings."""
    if settings is None:
        from app.core.config import get_settings

        settings = get_settings()
    server_settings, command_timeout = connection_bounds(settings)
    connect_args: dict[str, Any] = {
        "server_settings": server_settings,
        "timeout": settings.db_connect_timeout_seconds,
        "command_timeout": command_timeout,
        **statement_cache_args(settings),
    }
    engine = create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=max(1, pool_size // 2) if max_overflow is None else max_overflow,
        pool_timeout=settings.db_pool_timeout_seconds,
        pool_pre_ping=False,  # a round trip per checkout; closed connections are caught below
        connect_args=connect_args,
    )
    install_disconnect_handling(engine)
    event.listen(engine.sync_engine, "connect", _detect_citus)
    return engine


def _detect_citus(dbapi_connection: Any, record: Any) -> None:
    """The first connection of the process tells whether the database is a Citus
    coordinator (`app.core.pg.on_citus`; a worker process has no asyncpg pool)."""
    if citus_known():
        return
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(CITUS_SQL)
        note_citus(bool(cursor.fetchone()[0]))
    finally:
        cursor.close()


def statement_cache_args(settings: Settings) -> dict[str, Any]:
    """The engine's connect arguments for `LOOM_DB_STATEMENT_CACHE=false`: no cache in
    asyncpg or in SQLAlchemy's adapter, and a name of its own for each statement the
    adapter prepares (it prepares every one; a pooler in transaction mode may hand the next
    one to a server connection where `__asyncpg_stmt_1__` already exists)."""
    if settings.db_statement_cache:
        return {}
    return {
        "statement_cache_size": 0,
        "prepared_statement_cache_size": 0,
        "prepared_statement_name_func": _statement_name,
    }


def _statement_name() -> str:
    return f"__loom_{uuid.uuid4().hex}__"


def _driver(dbapi_connection: Any) -> Any:
    """The asyncpg connection under SQLAlchemy's adapter (or None)."""
    return getattr(dbapi_connection, "_connection", None)


def install_disconnect_handling(engine: AsyncEngine) -> None:
    """A broken connection never serves a request and never goes back to the pool.

    - checkout: a pooled connection the server has closed meanwhile (restart, failover,
      `pg_terminate_backend`) is noticed without a round trip (asyncpg already saw the
      socket close) and replaced by a fresh one, so the first request after the database
      is back succeeds;
    - errors: every connection-level failure (`app.core.db_errors.is_connection_error`,
      client-side timeouts of a frozen server included) counts as a disconnect, so
      SQLAlchemy invalidates the connection (and the pool's older ones); the connection is
      closed at once, without the graceful close that would wait on a frozen server.
    Raw asyncpg work under a request's session is covered by `get_db`."""

    @event.listens_for(engine.sync_engine, "checkout")
    def _closed_on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        raw = _driver(dbapi_connection)
        if raw is not None and raw.is_closed():
            raise sa_exc.DisconnectionError("the server closed this pooled connection")

    @event.listens_for(engine.sync_engine, "handle_error")
    def _disconnects(ctx: Any) -> None:
        # is_disconnect is already set for a closed connection and for a cancellation
        if not (ctx.is_disconnect or is_connection_error(ctx.original_exception)):
            return
        conn = ctx.connection
        if conn is not None and not conn.invalidated and not conn.closed:
            _terminate(conn.connection.driver_connection)
        if isinstance(ctx.original_exception, (asyncio.TimeoutError, TimeoutError)):
            # the server did not answer this connection: the others may be fine, and
            # recycling them all would make every next request wait on a close
            ctx.invalidate_pool_on_disconnect = False
        ctx.is_disconnect = True

    dialect = engine.sync_engine.dialect
    default_close = dialect.do_close

    def _bounded_close(dbapi_connection: Any) -> None:
        """Pool close (overflow, recycle): a polite goodbye, but never wait long on it."""
        raw = _driver(dbapi_connection)
        if raw is None:
            default_close(dbapi_connection)
            return
        if raw.is_closed():
            return
        try:
            await_(raw.close(timeout=CLOSE_TIMEOUT))
        except Exception:  # no answer: cut it
            _terminate(raw)
        except BaseException:
            _terminate(raw)
            raise

    dialect.do_close = _bounded_close  # type: ignore[method-assign]


def _terminate(raw: Any) -> None:
    """Close an asyncpg connection now (no goodbye to a server that may not answer)."""
    try:
        if raw is not None and not raw.is_closed():
            raw.terminate()
    except Exception:  # already broken: nothing to close
        pass


async def discard_connection(session: AsyncSession, exc: BaseException) -> None:
    """Invalidate the connection a session holds after a connection-level failure that
    SQLAlchemy did not see (raw asyncpg calls), so it is never pooled again. A session
    that holds no connection (the failure was opening one) is left alone: asking it for
    one would only wait on the database again."""

    def _discard(sync_session: Any) -> None:
        trans = sync_session.get_transaction()
        # SessionTransaction._connections: bind -> (Connection, Transaction, ...)
        for held in list(getattr(trans, "_connections", {}).values()) if trans else []:
            conn = held[0]
            if conn.invalidated or conn.closed:
                continue
            _terminate(conn.connection.driver_connection)
            conn.invalidate(exc)

    try:
        await session.run_sync(_discard)
    except Exception as err:  # the session is being torn down anyway
        log.debug("discarding a broken connection failed: %s", type(err).__name__)


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
    return async_sessionmaker(
        engine.execution_options(isolation_level="AUTOCOMMIT"),
        expire_on_commit=False,
        autoflush=False,
    )


F = TypeVar("F", bound=Callable[..., Any])


def read_only(fn: F) -> F:
    """Mark a route whose every statement is a read (or a single self-contained write):
    its DbDep session runs in autocommit, saving a BEGIN and a COMMIT round trip."""
    setattr(fn, "__loom_read_only__", True)  # noqa: B010 (a mark on any callable)
    return fn


@asynccontextmanager
async def transaction(maker: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session that commits on success and rolls back on error (discarding a broken
    connection first); its `after_commit` callbacks run once it has committed. In a
    request, the whole of it ends by the request's database deadline (`deadline.guarded`:
    the pool wait, the connect and every statement together)."""
    async with deadline.guarded(), maker() as session:
        try:
            yield session
            await session.commit()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) or is_connection_error(exc):
                await discard_connection(session, exc)
            await session.rollback()
            raise
    await run_after_commit(session)


class _Databases(Protocol):
    """What `get_db` takes of the started app (`app.state.AppState`)."""

    @property
    def sessionmaker(self) -> async_sessionmaker[AsyncSession]: ...
    @property
    def read_sessionmaker(self) -> async_sessionmaker[AsyncSession]: ...


async def get_db(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's session (`transaction`; autocommit for `read_only` routes)."""
    state: _Databases = started_state(request.app)
    maker = state.sessionmaker
    if getattr(request.scope.get("endpoint"), "__loom_read_only__", False):
        maker = state.read_sessionmaker
    async with transaction(maker) as session:
        yield session


# scope="function": commit before the response is sent, so a client never reads before
# its write is visible and a failed commit is reported as an error.
DbDep = Annotated[AsyncSession, Depends(get_db, scope="function")]

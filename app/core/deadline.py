"""A request's database deadline: every wait on the database together (for a pooled
connection, to connect, for statements) ends by it, so the answer, a 503 included, comes
within `LOOM_DB_REQUEST_SECONDS` and a little overhead.

The app's middleware (`app.core.edge`) arms it when a request starts; `app.core.pg.connection`
waits for a pooled connection at most until then and runs its body under an `asyncio.timeout`
at that moment (the statement is cut and the connection discarded, and the request answers
503 `database_unavailable`). Time spent on something else while a connection is held (an
LLM rerank) is not database time: `elsewhere()` moves the deadline on by as long as it took.
Work outside a request (the worker, startup) has no deadline; so does a request that opts
out (`unbounded`: a streamed export, an import, which take as long as their size needs and
are bounded per statement instead).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar, Token
from typing import Any

# the deadline on the event loop's clock (`loop.time()`), None when there is none
_AT: ContextVar[float | None] = ContextVar("loom_db_deadline", default=None)
# the timeouts of the connections held now (innermost last), moved by `elsewhere`
_HELD: ContextVar[tuple[asyncio.Timeout, ...]] = ContextVar("loom_db_held", default=())


def arm(seconds: float) -> Token[float | None]:
    """Start the current request's deadline `seconds` from now (0: none)."""
    at = asyncio.get_running_loop().time() + seconds if seconds > 0 else None
    return _AT.set(at)


def disarm(token: Token[float | None]) -> None:
    _AT.reset(token)


@asynccontextmanager
async def unbounded() -> AsyncIterator[None]:
    """Lift the deadline for the block (a streamed export, an import)."""
    token = _AT.set(None)
    try:
        yield
    finally:
        _AT.reset(token)


class bounded:  # noqa: N801 (used as a function: `async with bounded(wait):`)
    """The waits of one pooled connection, on one `asyncio.Timeout`: while it is acquired,
    at most `wait` seconds and never past the deadline; once `hold()` is called, until the
    deadline (moved on by `elsewhere`). Either cut raises `TimeoutError` at the block's
    end. A class with one timer, not two nested blocks: every pooled connection of a
    request enters one."""

    __slots__ = ("_at", "_timeout", "_token", "_wait")

    def __init__(self, wait: float) -> None:
        self._wait = wait
        self._token: Token[tuple[asyncio.Timeout, ...]] | None = None

    async def __aenter__(self) -> None:
        self._at = at = _AT.get()
        until = asyncio.get_running_loop().time() + self._wait
        self._timeout = timeout = asyncio.timeout_at(until if at is None or at > until else at)
        await timeout.__aenter__()

    def hold(self) -> None:
        """The connection is acquired: its body runs until the deadline (the same moment
        as the wait's, unless the pool's wait was the shorter: then one timer serves both)."""
        if self._timeout.when() != self._at:
            self._timeout.reschedule(self._at)
        self._token = _HELD.set((*_HELD.get(), self._timeout))

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if self._token is not None:
            _HELD.reset(self._token)
        await self._timeout.__aexit__(exc_type, exc, tb)


@asynccontextmanager
async def elsewhere() -> AsyncIterator[None]:
    """A wait that is not on the database (an LLM call while a connection is held): the
    deadline stops for it and goes on afterwards from where it was."""
    held, deadline = _HELD.get(), _AT.get()
    if deadline is None:
        yield
        return
    loop = asyncio.get_running_loop()
    started = loop.time()
    for t in held:
        t.reschedule(None)
    try:
        yield
    finally:
        moved = deadline + (loop.time() - started)
        _AT.set(moved)
        for t in held:
            t.reschedule(moved)


class guarded:  # noqa: N801 (used as a function: `async with guarded():`)
    """A block of database work on a session of its own (SQLAlchemy's, whose pool wait,
    connect and statements are each bounded but not together) ends by the request's
    deadline, moved on by `elsewhere` like a pooled connection's; with no deadline (the
    worker, startup, an `unbounded` request) it changes nothing. Cut, it raises
    `TimeoutError` at the block's end, which the app answers 503."""

    __slots__ = ("_timeout", "_token")

    async def __aenter__(self) -> None:
        at = _AT.get()
        self._timeout: asyncio.Timeout | None = None
        if at is None:
            return
        self._timeout = timeout = asyncio.timeout_at(at)
        await timeout.__aenter__()
        self._token = _HELD.set((*_HELD.get(), timeout))

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if self._timeout is None:
            return
        _HELD.reset(self._token)
        await self._timeout.__aexit__(exc_type, exc, tb)

"""Extra context blocks from other domains (knowledge, learned...), counted in the budget.

A provider is a `BlockProvider`: ``async (open_db, session_row, budget_tokens, newest_user,
*, as_of, query) -> ContextBlock | None``, where ``open_db()`` gives the build's one
connection for its providers (``async with open_db() as conn``; `OneConnection`: taken
from the pool when the first provider needs it, in autocommit, and given back when the
build ends), so a session that configures no block costs no connection at all.
``newest_user`` is the text of the newest user message with text, from the L1 the build
read already (None when L1 holds none: a provider that needs it reads it,
``app.context.blocks.newest_user_text``). ``as_of`` is the request's ``facts_as_of``
(blocks show what was true then; None: now) and ``query`` the build's recall query (None:
the newest user message): both travel as arguments, so a provider reads nothing of the
request but what it is handed. The builder calls the providers it is given
(``app.wiring`` lists them) after ROM/Kernel with the tokens still free, renders the
blocks in that order and drops the last ones first if the budget is short. A failing
provider is logged and skipped: it never fails a context build.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from app.core.pg import cut_after
from app.messages import repository as messages_repository
from app.models.session import SessionRow

log = logging.getLogger("loom.context")


@dataclass(frozen=True)
class ContextBlock:
    """A provider's block. `sources` (what it was made from: ids, versions, scores) and
    `replay` (what re-renders it from those sources, `app.context.replay_blocks`) go into
    the build's manifest (`app.manifests.record`), with `why` (the block's reason, in its
    provider's words: the manifest adds the share of the budget); none is shown to the
    model."""

    name: str
    text: str
    token_count: int
    sources: tuple[dict[str, Any], ...] = ()
    replay: dict[str, Any] = field(default_factory=dict)
    why: str = ""  # the manifest's reason for the block, in the provider's words


OpenDb = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


class OneConnection:
    """`open_db` for one build: every provider gets the same pooled connection, taken
    when the first one asks (`connect`) and given back by `close`. A provider that failed
    at the connection level leaves it cut, and the next one takes a fresh connection."""

    __slots__ = ("_conn", "_connect", "_held")

    def __init__(self, connect: OpenDb) -> None:
        self._connect = connect
        self._held: AbstractAsyncContextManager[asyncpg.Connection] | None = None
        self._conn: asyncpg.Connection | None = None

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[asyncpg.Connection]:
        if self._conn is None:
            held = self._connect()
            self._conn = await held.__aenter__()
            self._held = held
        try:
            yield self._conn
        except BaseException as exc:
            if cut_after(exc):
                await self.close(exc)
            raise

    async def close(self, exc: BaseException | None = None) -> None:
        held, self._held, self._conn = self._held, None, None
        if held is not None:
            await held.__aexit__(type(exc) if exc else None, exc, None)


class BlockProvider(Protocol):
    """A block of another domain for one build (`app.wiring` lists them): see the module's
    docstring for what each argument is."""

    async def __call__(
        self,
        open_db: OpenDb,
        session_row: SessionRow,
        budget_tokens: int,
        newest_user: str | None,
        *,
        as_of: datetime | None,
        query: str | None,
    ) -> ContextBlock | None: ...


async def newest_user_text(
    conn: asyncpg.Connection, session_row: SessionRow, known: str | None
) -> str:
    """The text of the session's newest user message with text: `known` (what the build
    found in L1) when given, else read (L1 held no such message)."""
    if known is not None:
        return known
    return await messages_repository.newest_user_text(conn, session_row.tenant_id, session_row.id)


async def collect(
    open_db: OpenDb,
    session_row: SessionRow,
    budget_tokens: int,
    providers: Sequence[BlockProvider],
    newest_user: str | None = None,
    *,
    as_of: datetime | None = None,
    query: str | None = None,
) -> list[ContextBlock]:
    """Blocks for one build; each provider sees the tokens the earlier ones left,
    `newest_user`, `as_of` and `query` (see the module's docstring)."""
    out: list[ContextBlock] = []
    left = budget_tokens
    for fn in providers:
        if left <= 0:
            break
        try:
            block = await fn(open_db, session_row, left, newest_user, as_of=as_of, query=query)
        except Exception:
            log.exception("context block provider %s failed", getattr(fn, "__name__", fn))
            continue
        if block is not None and block.text and block.token_count <= left:
            out.append(block)
            left -= block.token_count
    return out

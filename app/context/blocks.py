"""Extra context blocks from other domains (knowledge, learned...), counted in the budget.

A provider is a `BlockProvider`: ``async (open_db, session_row, budget_tokens, newest_user,
*, as_of, query) -> ContextBlock | None``, where ``open_db()`` opens a read session
(``async with open_db() as db``) for the providers that need the database: a session that
configures no block costs no connection at all. ``newest_user`` is the text of the newest
user message with text, from the L1 the build read already (None when L1 holds none: a
provider that needs it reads it, ``app.context.blocks.newest_user_text``). ``as_of`` is the
request's ``facts_as_of`` (blocks show what was true then; None: now) and ``query`` the
build's recall query (None: the newest user message): both travel as arguments, so a
provider reads nothing of the request but what it is handed. The builder calls the
providers it is given (``app.wiring`` lists them) after ROM/Kernel with the tokens still
free, renders the blocks in that order and drops the last ones first if the budget is short.
A failing provider is logged and skipped: it never fails a context build.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa

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


OpenDb = Callable[[], AbstractAsyncContextManager[Any]]


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


_NEWEST_USER = sa.text(
    "SELECT text FROM messages WHERE tenant_id = :tid AND session_id = :sid AND role = 'user' "
    "AND text <> '' ORDER BY seq DESC LIMIT 1"
)


async def newest_user_text(db: Any, session_row: SessionRow, known: str | None) -> str:
    """The text of the session's newest user message with text: `known` (what the build
    found in L1) when given, else read (L1 held no such message)."""
    if known is not None:
        return known
    row = (
        await db.execute(_NEWEST_USER, {"tid": session_row.tenant_id, "sid": session_row.id})
    ).first()
    return str(row.text) if row is not None else ""


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

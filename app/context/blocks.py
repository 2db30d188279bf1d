"""Extra context blocks from other domains (knowledge, learned...), counted in the budget.

A provider is ``async (open_db, session_row, budget_tokens) -> ContextBlock | None``, where
``open_db()`` opens a read session (``async with open_db() as db``) for the providers that
need the database: a session that configures no block costs no connection at all. The
builder calls the providers it is given (``app.wiring`` lists them) after ROM/Kernel with
the tokens still free, renders the blocks in that order and drops the last ones first if
the budget is short.
A failing provider is logged and skipped: it never fails a context build.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("loom.context")


@dataclass(frozen=True)
class ContextBlock:
    """A provider's block. `sources` (what it was made from: ids, versions, scores) and
    `replay` (what re-renders it from those sources, `app.context.replay_blocks`) go into
    the build's manifest (`app.context.manifest`); neither is shown to the model."""

    name: str
    text: str
    token_count: int
    sources: tuple[dict[str, Any], ...] = ()
    replay: dict[str, Any] = field(default_factory=dict)


OpenDb = Callable[[], AbstractAsyncContextManager[Any]]
BlockProvider = Callable[[OpenDb, Any, int], Awaitable[ContextBlock | None]]


async def collect(
    open_db: OpenDb, session_row: Any, budget_tokens: int, providers: Sequence[BlockProvider]
) -> list[ContextBlock]:
    """Blocks for one build; each provider sees the tokens the earlier ones left."""
    out: list[ContextBlock] = []
    left = budget_tokens
    for fn in providers:
        if left <= 0:
            break
        try:
            block = await fn(open_db, session_row, left)
        except Exception:
            log.exception("context block provider %s failed", getattr(fn, "__name__", fn))
            continue
        if block is not None and block.text and block.token_count <= left:
            out.append(block)
            left -= block.token_count
    return out

"""Extra context blocks from other domains (knowledge, learned...), counted in the budget.

A provider is ``async (db, session_row, budget_tokens) -> ContextBlock | None``; the
builder calls every provider after ROM/Kernel with the tokens still free, renders the
blocks in registration order and drops the last ones first if the budget is short.
A failing provider is logged and skipped: it never fails a context build.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("loom.context")


@dataclass(frozen=True)
class ContextBlock:
    name: str
    text: str
    token_count: int


BlockProvider = Callable[[Any, Any, int], Awaitable[ContextBlock | None]]
_providers: list[BlockProvider] = []


def register_block_provider(fn: BlockProvider) -> BlockProvider:
    """Add a provider (idempotent: registering the same function twice keeps one)."""
    if fn not in _providers:
        _providers.append(fn)
    return fn


async def collect(db: Any, session_row: Any, budget_tokens: int) -> list[ContextBlock]:
    """Blocks for one build; each provider sees the tokens the earlier ones left."""
    out: list[ContextBlock] = []
    left = budget_tokens
    for fn in list(_providers):
        if left <= 0:
            break
        try:
            block = await fn(db, session_row, left)
        except Exception:
            log.exception("context block provider %s failed", getattr(fn, "__name__", fn))
            continue
        if block is not None and block.text and block.token_count <= left:
            out.append(block)
            left -= block.token_count
    return out

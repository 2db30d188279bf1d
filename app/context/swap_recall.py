"""Automatic recall's reads (the I/O edge of `app.memory.recall_choice`): the session's swap
searched with the conversation-aware ranking, and the messages around the hits.

Each read takes a connection of the hot paths' pool for itself, and only when the build
asks (a session without recall, or without room for it, reads nothing more); the builds of
one turn share one search (`RecentReads`, two per process in `app.state.Caches`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from app.context.recent_reads import RecallGroups, RecallSearches
from app.memory.recall_choice import RecallConfig
from app.search import repository as search_repository
from app.search import service as search_service
from app.search.deps import options_for
from app.search.scope import SearchScope
from app.state import AppState


@dataclass
class SwapRecall:
    """`app.context.builder.RecallSource` over one session of the caller's tenant."""

    state: AppState
    tenant_id: uuid.UUID
    session_id: uuid.UUID
    config: RecallConfig

    async def search(
        self, query: str, exclude: list[int], exclude_from: int | None, limit: int
    ) -> list[tuple[Any, float]]:
        key = (self.tenant_id, self.session_id, query, tuple(exclude), exclude_from, limit)
        cached = self.state.caches[RecallSearches].get(key)
        if cached is not None:
            return cached
        scope = SearchScope(tenant_id=self.tenant_id, session_id=self.session_id)
        async with self.state.connection() as conn:
            outcome = await search_service.search(
                conn,
                scope,
                query,
                limit=limit,
                rerank=False,
                options=recall_options(self.state.settings),
                exclude_seqs=exclude,
                exclude_from=exclude_from,
            )
        found = [(h.message, h.bm25_score) for h in outcome.hits]
        self.state.caches[RecallSearches].put(key, found)
        return found

    async def load(self, seqs: list[int]) -> list[Any]:
        if not seqs:
            return []
        # messages never change once stored; a seq not stored yet stays missing here until
        # the entry expires (a group that needs it is incomplete and skipped, never cut)
        key = (self.tenant_id, self.session_id, tuple(seqs))
        cached = self.state.caches[RecallGroups].get(key)
        if cached is not None:
            return cached
        async with self.state.connection() as conn:
            rows = await search_repository.load_messages(
                conn, self.tenant_id, [(self.session_id, s) for s in seqs]
            )
        loaded = [rows[k] for k in sorted(rows, key=lambda k: k[1])]
        self.state.caches[RecallGroups].put(key, loaded)
        return loaded


def recall_options(settings: Any) -> search_service.SearchOptions:
    """The search's options for a recall: the prior without its length term (a recall
    pays for a long message in tokens; `app.messages.prior`)."""
    options = options_for(settings)
    return replace(options, windows=replace(options.windows, length_weight=0.0))


def recall_config(session_config: dict[str, Any] | None, requested: Any = None) -> RecallConfig:
    """The recall of one build: the request's (`ContextRequest.recall`), else the
    session's stored `config.recall`."""
    if requested is not None:
        return RecallConfig.from_stored(requested.model_dump())
    return RecallConfig.from_stored((session_config or {}).get("recall"))

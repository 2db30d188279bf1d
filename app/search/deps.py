"""What a search needs from the app: the LLM client, the rerank cache, and the search settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.core.config import Settings
from app.llm.client import LLMClient
from app.search.bm25 import WindowParams
from app.search.service import RerankCache, SearchOptions
from app.state import AppState, app_state


def options_for(settings: Settings) -> SearchOptions:
    """SearchOptions from Settings (LOOM_SEARCH_*)."""
    return SearchOptions(
        k1=settings.search_bm25_k1,
        b=settings.search_bm25_b,
        windows=WindowParams(
            window=settings.search_window,
            weight=settings.search_window_weight,
            date_boost=settings.search_date_boost,
            speaker_boost=settings.search_speaker_boost,
            after_weight=settings.search_window_after_weight,
            prior_weight=settings.search_prior_weight,
            when_boost=settings.search_when_boost,
        ),
        rerank_timeout_seconds=settings.search_rerank_timeout_seconds,
        rerank_cache_ttl_seconds=settings.search_rerank_cache_ttl_seconds,
    )


@dataclass(frozen=True, slots=True)
class SearchEnv:
    """LLM (or None), the rerank cache (Redis, may be down) and options for one request."""

    llm: LLMClient | None
    rerank_cache: RerankCache
    options: SearchOptions


def search_env_for(state: AppState) -> SearchEnv:
    """The SearchEnv of an app (also used by the built-in tools)."""
    return SearchEnv(
        llm=state.llm, rerank_cache=state.caches[RerankCache], options=options_for(state.settings)
    )


async def get_search_env(request: Request) -> SearchEnv:
    return search_env_for(app_state(request.app))


SearchEnvDep = Annotated[SearchEnv, Depends(get_search_env)]

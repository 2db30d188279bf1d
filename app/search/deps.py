"""What a search needs from the app: the LLM client, the rerank cache, and the search settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from app.llm.client import LLMClient
from app.search.bm25 import WindowParams
from app.search.service import RerankCache, SearchOptions
from app.state import AppState, app_state


def options_for(settings: Any) -> SearchOptions:
    """SearchOptions from Settings (defaults for any missing field)."""
    defaults = SearchOptions()
    return SearchOptions(
        k1=float(getattr(settings, "search_bm25_k1", defaults.k1)),
        b=float(getattr(settings, "search_bm25_b", defaults.b)),
        windows=WindowParams(
            window=int(getattr(settings, "search_window", defaults.windows.window)),
            weight=float(getattr(settings, "search_window_weight", defaults.windows.weight)),
            date_boost=float(getattr(settings, "search_date_boost", defaults.windows.date_boost)),
            speaker_boost=float(
                getattr(settings, "search_speaker_boost", defaults.windows.speaker_boost)
            ),
        ),
        rerank_timeout_seconds=float(
            getattr(settings, "search_rerank_timeout_seconds", defaults.rerank_timeout_seconds)
        ),
        rerank_cache_ttl_seconds=int(
            getattr(settings, "search_rerank_cache_ttl_seconds", defaults.rerank_cache_ttl_seconds)
        ),
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
        llm=state.llm, rerank_cache=state.caches.rerank, options=options_for(state.settings)
    )


async def get_search_env(request: Request) -> SearchEnv:
    return search_env_for(app_state(request.app))


SearchEnvDep = Annotated[SearchEnv, Depends(get_search_env)]

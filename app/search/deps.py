"""What a search needs from the app: the LLM client, Redis, and the search settings."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from app.core.lifecycle import on_shutdown
from app.llm import get_llm_client  # imported at start: the SDKs take seconds to import
from app.search.service import SearchOptions

log = logging.getLogger("loom.search")


def llm_for_app(state: Any) -> Any:
    """The app's LLM client (None without one), created once per app.

    Uses `app.state.llm` when the app provides one; otherwise builds one with
    `app.llm.get_llm_client(settings)` and keeps it on `app.state.search_llm`.
    """
    llm = getattr(state, "llm", None)
    if llm is not None:
        return llm
    if not hasattr(state, "search_llm"):
        try:
            state.search_llm = get_llm_client(state.settings)
        except Exception as exc:  # Misconfigured LLM: BM25-only search, never an error.
            log.warning("LLM client unavailable for rerank: %s", exc)
            state.search_llm = None
    return state.search_llm


@on_shutdown
async def _close_llm(app: Any) -> None:
    llm = getattr(app.state, "search_llm", None)
    if hasattr(app.state, "search_llm"):
        del app.state.search_llm
    if llm is not None and hasattr(llm, "aclose"):
        await llm.aclose()


def options_for(settings: Any) -> SearchOptions:
    """SearchOptions from Settings (defaults for any missing field)."""
    defaults = SearchOptions()
    return SearchOptions(
        k1=float(getattr(settings, "search_bm25_k1", defaults.k1)),
        b=float(getattr(settings, "search_bm25_b", defaults.b)),
        rerank_timeout_seconds=float(getattr(settings, "search_rerank_timeout_seconds",
                                             defaults.rerank_timeout_seconds)),
        rerank_cache_ttl_seconds=int(getattr(settings, "search_rerank_cache_ttl_seconds",
                                             defaults.rerank_cache_ttl_seconds)),
    )


@dataclass(frozen=True, slots=True)
class SearchEnv:
    """LLM (or None), Redis (may be down) and options for one request."""

    llm: Any
    redis: Any
    options: SearchOptions


def search_env_for(state: Any) -> SearchEnv:
    """The SearchEnv of an app (also used by the built-in tools)."""
    return SearchEnv(llm=llm_for_app(state), redis=getattr(state, "redis", None),
                     options=options_for(state.settings))


def get_search_env(request: Request) -> SearchEnv:
    return search_env_for(request.app.state)


SearchEnvDep = Annotated[SearchEnv, Depends(get_search_env)]

"""Swap search results (session search and agent/tenant search)."""

from __future__ import annotations

from loom_client.models._base import ResponseModel
from loom_client.models.sessions import Message


class QueryDate(ResponseModel):
    year: int | None
    month: int | None
    day: int | None


class SearchHit(ResponseModel):
    session_id: str
    seq: int
    bm25_score: float
    rerank_score: float | None
    message: Message


class SearchResult(ResponseModel):
    results: list[SearchHit]
    candidates: int
    reranked: bool
    rerank_skipped: str | None = None  # "budget" or "unavailable" when asked but not done
    query_lexemes: list[str]
    query_dates: list[QueryDate] = []
    promoted_seqs: list[int] = []

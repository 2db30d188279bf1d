"""Search API schemas."""

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.auth.schemas import AGENT_ID_PATTERN
from app.core.strict import JsonAwareDatetime, JsonInt
from app.messages.schemas import MessagePublic

MAX_QUERY_LENGTH = 10_000
DEFAULT_LIMIT = 10
MAX_LIMIT = 20


class TimeRange(BaseModel):
    """Bounds on the results' `created_at` (the message's original time for imported
    history), and the ranking."""

    ranking: Literal["conversation", "message"] = Field(
        default="conversation",
        description=(
            "`conversation`: a message's BM25 plus the BM25 of the turns around it (finds the "
            "answer next to the turn that shares the query's words). `message`: plain BM25 of "
            "each message alone (only messages holding a query word)."
        ),
    )

    after: JsonAwareDatetime | None = Field(
        default=None,
        description=("Only messages created at or after this time (RFC 3339 with a timezone)."),
    )
    before: JsonAwareDatetime | None = Field(
        default=None, description=("Only messages created before this time.")
    )


class SessionSearchCreate(TimeRange):
    """A search over one session's full history (the swap), ranked by conversation: a
    message's own BM25 plus the BM25 of the turns around it."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        max_length=MAX_QUERY_LENGTH,
        description=(
            "Free text. Words are stemmed with the tenant's text search configuration and "
            "OR-ed; operators and punctuation are plain text. Empty or stop-word-only "
            "queries return no results."
        ),
    )
    limit: JsonInt = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    rerank: StrictBool = Field(
        default=True,
        description=(
            "Rerank the ranking's top 50 with the LLM. Without an LLM, or when it fails, results "
            "keep BM25 order and `reranked` is false."
        ),
    )
    promote: StrictBool = Field(
        default=False,
        description=(
            "Promote the results into the session's context (409 if that would exceed the budget)."
        ),
    )


class SearchCreate(TimeRange):
    """A search across the sessions of one agent or of the whole tenant."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(max_length=MAX_QUERY_LENGTH)
    scope: Literal["agent", "user", "tenant"] = Field(
        default="agent",
        description=(
            "`agent`: the sessions of `agent_id` (default: the caller's effective agent). "
            "`user`: the sessions with `user_id` (an agent key: its own agent's of them; "
            "404 `user_not_found` for a user it has no session with). "
            "`tenant`: every session of the tenant (not for agent keys)."
        ),
    )
    agent_id: str | None = Field(
        default=None,
        pattern=AGENT_ID_PATTERN,
        description=(
            "For `scope=agent`: the agent to search. Agent keys may only name themselves."
        ),
    )
    user_id: str | None = Field(
        default=None,
        pattern=AGENT_ID_PATTERN,
        description=("For `scope=user` (required there): whose sessions to search."),
    )
    limit: JsonInt = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    rerank: StrictBool = True


class SearchHitPublic(BaseModel):
    """One result: the message and its scores."""

    session_id: uuid.UUID
    seq: int
    message: MessagePublic
    bm25_score: float = Field(
        description=(
            "The conversation-aware BM25 score: the message's own BM25 plus the weighted BM25 "
            "of the turns around it (a neighbour of a match scores without a word of the "
            "query)."
        )
    )
    rerank_score: float | None = Field(
        description=("The LLM's 0-10 relevance; null when not reranked or the LLM left it out.")
    )


class QueryDate(BaseModel):
    """A date at the precision the query named it (null: any)."""

    year: int | None
    month: int | None
    day: int | None


class SearchPublic(BaseModel):
    """Results, best first."""

    results: list[SearchHitPublic]
    reranked: bool = Field(description="True when the order comes from the LLM rerank.")
    rerank_skipped: str | None = Field(
        None,
        description="Why a rerank asked for was not done: `budget` (the tenant's daily token "
        "budget is spent) or `unavailable` (the LLM failed).",
    )
    query_lexemes: list[str] = Field(description="The stemmed terms that were searched.")
    query_dates: list[QueryDate] = Field(
        default_factory=list,
        description=(
            'Dates the query names ("in May 2023", "on 9 November", "2023-05-08"): '
            "messages created on them rank higher."
        ),
    )
    candidates: int = Field(description="Candidates ranked (at most 50).")
    promoted_seqs: list[int] = Field(
        default_factory=list,
        description=("Seqs promoted into the session's context (with `promote: true`)."),
    )

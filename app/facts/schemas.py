"""API schemas of facts: search and forget (REST, MCP, the built-in tools),
a session's extraction and the fact lists. Items, their versions and corrections
(`MemoryItemUpdate`) are knowledge's (`app.knowledge.schemas`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.core.strict import JsonInt
from app.core.times import AS_OF_DOC, AsOf
from app.knowledge.schemas import FACTS_SCOPE_PATTERN, MemoryItemPublic


class FactSearch(BaseModel):
    """`search_facts`: the valid facts of a scope best matching a query."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000)
    scope: str = Field(default="agent", pattern=FACTS_SCOPE_PATTERN)
    limit: JsonInt = Field(default=10, ge=1, le=50)
    include_invalidated: StrictBool = False
    as_of: AsOf | None = Field(
        default=None,
        description=("The facts true at this time (world time), instead of now. " + AS_OF_DOC),
    )


class FactForget(BaseModel):
    """`forget_fact`: invalidate a fact now, with a reason (kept in its history)."""

    model_config = ConfigDict(extra="forbid")

    id: uuid.UUID
    reason: str = Field(min_length=1, max_length=1000)


class FactExtractionPublic(BaseModel):
    """A session's fact extraction: its watermark, its latest job and its LLM usage."""

    status: str = Field(
        description="idle (never ran), pending, running, succeeded, "
        "skipped (see `skipped`), failed (see `last_error`)."
    )
    watermark_seq: int = Field(description="The last message seq read by extraction.")
    job_id: str | None = None
    attempts: int = 0
    last_error: str | None = None
    skipped: str | None = Field(None, description="no_llm, disabled or budget.")
    runs: int = 0
    last_result: dict[str, Any] | None = Field(
        None,
        description=(
            "The last run: batches, messages, added, updated, invalidated, unchanged, "
            "llm_calls, input_tokens, output_tokens, watermark, skipped."
        ),
    )
    failed_ranges: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "Message ranges whose batch failed every try: `{first_seq, last_seq, error, at}`. "
            "The watermark moved past them; `POST .../memory/extract?retry_failed=true` re-runs "
            "them."
        ),
    )
    llm_calls: int = 0
    llm_input_tokens: int = 0
    llm_output_tokens: int = 0
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class ExtractPublic(BaseModel):
    enqueued: bool = Field(description="A background job was queued (202).")
    result: dict[str, Any] | None = Field(
        None, description=("wait=true: what this run did (see FactExtractionPublic.last_result).")
    )
    extraction: FactExtractionPublic


class FactList(BaseModel):
    items: list[MemoryItemPublic]

"""Knowledge tiers (task / project / global items), context packages, the learned layer
and agent profiles."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from loom_client.models._base import Page, ResponseModel

OrderBy = Literal[
    "timestamp", "-timestamp", "created_at", "-created_at", "updated_at", "-updated_at",
    "importance", "-importance", "token_cost", "-token_cost", "kind", "-kind",
    "source", "-source", "id", "-id",
]


class MemoryItem(ResponseModel):
    id: str
    scope: str
    kind: str
    source: str
    tags: list[str]
    importance: float
    text: str | None
    payload: Any = None
    token_cost: int
    created_at: datetime
    updated_at: datetime
    version: int = 1
    valid_from: datetime | None = None
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    source_session_id: str | None = None
    source_seqs: list[int] = []
    key: str | None = None
    stated_at: datetime | None = None
    sources: list[dict[str, Any]] = []


class MemoryItemVersion(ResponseModel):
    """One version of an item: add, update, invalidate, forget, confirm, edit, delete or
    promote, with who made it (`actor`, `actor_key_id`, `actor_agent_id`)."""

    version: int
    change: str
    text: str | None = None
    importance: float
    tags: list[str] = []
    valid_from: datetime | None = None
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    source_session_id: str | None = None
    source_seqs: list[int] = []
    reason: str | None = None
    changed_at: datetime


class MemoryItemHistory(ResponseModel):
    item: MemoryItem
    versions: list[MemoryItemVersion]
    superseded_by: MemoryItem | None = None
    supersedes: list[MemoryItem] = []


class FactExtraction(ResponseModel):
    """A session's fact extraction: watermark, latest job, LLM usage."""

    status: str
    watermark_seq: int
    job_id: str | None = None
    attempts: int = 0
    last_error: str | None = None
    skipped: str | None = None
    runs: int = 0
    last_result: dict[str, Any] | None = None
    llm_calls: int = 0
    llm_input_tokens: int = 0
    llm_output_tokens: int = 0


class ExtractResult(ResponseModel):
    enqueued: bool = False
    """True: an extraction job was queued (202); False: extracted in the request (200)."""
    result: dict[str, Any] | None = None
    extraction: FactExtraction


class MemoryItemList(Page):
    items: list[MemoryItem]


class ClearResult(ResponseModel):
    scope: str
    removed: int


class TaskCompleteResult(ResponseModel):
    task_id: str
    promoted: list[str]
    cleared: int
    evicted: int


class TierUsage(ResponseModel):
    allowance: int
    used_tokens: int
    candidate_tokens: int
    candidate_count: int
    included_count: int


class PackageItem(MemoryItem):
    tier: str


class ContextPackage(ResponseModel):
    budget_tokens: int
    used_tokens: int
    compression_ratio: float
    tiers: dict[str, TierUsage]
    items: list[PackageItem]
    text: str
    """The items rendered as a context block."""


class Learned(ResponseModel):
    """One version of an agent's learned layer."""

    agent_id: str
    version: int
    active_version: int
    latest_version: int
    signatures: dict[str, Any] = {}
    demonstrations: list[Any] = []
    tuned_prompts: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    created_at: datetime


class Profile(ResponseModel):
    """One version of an agent profile (the ROM new sessions of the agent start with)."""

    agent_id: str
    version: int
    system_prompt: str
    patterns: list[Any]
    backend_schema: Any = None
    created_at: datetime

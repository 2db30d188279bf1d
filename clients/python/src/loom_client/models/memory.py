"""A session's memory layers, compression, promotion, snapshots and Kernel."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from loom_client.models._base import Page, RequestModel, ResponseModel
from loom_client.models.sessions import LayerTokens


class Summary(ResponseModel):
    start_seq: int
    end_seq: int
    text: str
    token_count: int
    method: str


class CompressionJob(ResponseModel):
    status: str
    job_id: str | None = None
    attempts: int = 0
    runs: int = 0
    summaries_written: int = 0
    tokens_saved: int = 0
    last_error: str | None = None
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Memory(ResponseModel):
    """The layers: L1 seqs, L2 summaries, promoted seqs, tokens and usage."""

    version: int
    budget: int
    usage: float
    tokens: LayerTokens
    l1_seqs: list[int]
    l1_start_seq: int
    l2: list[Summary]
    promoted_seqs: list[int]
    pending_triggers: list[str]
    compression_due: bool
    compression: CompressionJob | None = None
    snapshot_count: int
    rom_profile_version: int | None


class CompressResult(ResponseModel):
    enqueued: bool = False
    """True: a compression job was queued (202); False: compressed in the request (200)."""
    summaries_written: int = 0
    memory: Memory | None = None


class PromoteSkip(ResponseModel):
    seq: int
    reason: str


class PromoteResult(ResponseModel):
    added: list[int]
    promoted_seqs: list[int]
    promoted_tokens: int
    usage: float
    skipped: list[PromoteSkip] = []


class Cleared(ResponseModel):
    cleared: int


class Snapshot(ResponseModel):
    id: str
    start_seq: int
    end_seq: int
    content: str
    token_count: int
    summary_count: int
    created_at: datetime


class SnapshotList(Page):
    items: list[Snapshot]


class ToolDefinition(RequestModel):
    """An Anthropic tool definition (extra fields such as `cache_control` pass through)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class Kernel(ResponseModel):
    tools: list[dict[str, Any]]
    schemas: list[dict[str, Any]]
    large_result_ref: dict[str, Any] | None
    tokens: int


class KernelSchema(ResponseModel):
    name: str
    schema_: Any = Field(alias="schema")
    evicted: list[str] = []


class JobListed(ResponseModel):
    """A session's latest background job of one kind."""

    kind: Literal["compression", "facts"] | str
    session_id: str
    agent_id: str
    status: str
    attempts: int = 0
    last_error: str | None = None
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime


class QueueStatus(ResponseModel):
    """The job queue's depth and whether a worker reported lately."""

    depth: int
    worker_alive: bool
    worker_report: str | None = None


class JobList(Page):
    """One page of jobs, most recently changed first (`queue`: None for agent keys)."""

    items: list[JobListed]
    queue: QueueStatus | None = None

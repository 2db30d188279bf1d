"""Memory API schemas."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.strict import JSON_INT, JsonInt
from app.jobs.schemas import CompressionJobPublic


class RomInput(BaseModel):
    """An inline ROM, frozen into a session at creation (instead of the agent profile)."""

    model_config = ConfigDict(extra="forbid")

    system_prompt: str = Field(max_length=1_000_000)
    patterns: list[Any] = Field(default_factory=list, max_length=10_000)
    backend_schema: Any = None


class ToolDefinition(BaseModel):
    """An Anthropic-style tool definition (rendered as an OpenAI function too)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, max_length=128, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str = Field(default="", max_length=100_000)
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class KernelToolsUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tools: list[ToolDefinition] = Field(max_length=500)

    @model_validator(mode="after")
    def _unique(self) -> KernelToolsUpdate:
        names = [t.name for t in self.tools]
        if len(names) != len(set(names)):
            raise ValueError("tool names must be unique")
        return self


class KernelSchemaUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_: Any = Field(alias="schema", description="Any JSON describing the schema.")


class KernelSchemaPublic(BaseModel):
    name: str
    schema_: Any = Field(alias="schema", serialization_alias="schema")
    evicted: list[str] = Field(
        default_factory=list, description="Schemas dropped from the LRU by this write."
    )

    model_config = ConfigDict(populate_by_name=True)


class KernelPublic(BaseModel):
    tools: list[dict[str, Any]]
    schemas: list[dict[str, Any]] = Field(description="Most recently used first (LRU, max 10).")
    large_result_ref: dict[str, Any] | None
    tokens: int


class SummaryPublic(BaseModel):
    start_seq: int
    end_seq: int
    text: str
    method: str
    token_count: int


class LayerTokens(BaseModel):
    rom: int
    kernel: int
    l2: int
    promoted: int
    l1: int
    total: int


class MemoryPublic(BaseModel):
    """The stored layers. ``usage`` = stored memory tokens / budget (drives compression)."""

    version: int
    rom_profile_version: int | None
    l1_seqs: list[int]
    l1_start_seq: int
    l2: list[SummaryPublic]
    promoted_seqs: list[int]
    snapshot_count: int
    tokens: LayerTokens
    budget: int
    usage: float
    compression_due: bool
    pending_triggers: list[str]
    compression: CompressionJobPublic | None = Field(
        default=None,
        description="The latest background compression job: pending, running, "
        "succeeded or failed (with its last error); null if none ever ran.",
    )


class SnapshotPublic(BaseModel):
    id: str
    start_seq: int
    end_seq: int
    content: str
    token_count: int
    summary_count: int
    created_at: Any


class SnapshotList(BaseModel):
    items: list[SnapshotPublic]
    next_cursor: str | None


class PromoteRequest(BaseModel):
    """Messages to promote, by ``seqs`` and/or an inclusive ``start_seq``..``end_seq``
    (both or neither; ascending; at most 200 messages)."""

    # A range (start_seq and end_seq together), or no range and seqs not empty. (The range's
    # order and length are in the description: JSON Schema cannot compare two fields.)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {
                    "required": ["start_seq", "end_seq"],
                    "properties": {
                        "start_seq": {"type": "integer"},
                        "end_seq": {"type": "integer"},
                    },
                },
                {
                    "required": ["seqs"],
                    "properties": {
                        "seqs": {"minItems": 1},
                        "start_seq": {"type": "null"},
                        "end_seq": {"type": "null"},
                    },
                },
            ]
        },
    )

    seqs: list[JsonInt] = Field(default_factory=list, max_length=200)
    start_seq: Annotated[int, Field(ge=1), JSON_INT] | None = Field(default=None)
    end_seq: Annotated[int, Field(ge=1), JSON_INT] | None = Field(default=None)

    @model_validator(mode="after")
    def _some(self) -> PromoteRequest:
        if (self.start_seq is None) != (self.end_seq is None):
            raise ValueError("give both start_seq and end_seq")
        if self.start_seq is not None and self.end_seq is not None:
            if self.end_seq < self.start_seq or self.end_seq - self.start_seq >= 200:
                raise ValueError("the range must be ascending and at most 200 messages")
        if not self.seqs and self.start_seq is None:
            raise ValueError("give seqs or a range")
        return self

    def all_seqs(self) -> list[int]:
        out = set(self.seqs)
        if self.start_seq is not None and self.end_seq is not None:
            out |= set(range(self.start_seq, self.end_seq + 1))
        return sorted(out)


class PromoteSkip(BaseModel):
    seq: int
    reason: Literal["shown_verbatim", "already_promoted", "not_found"] = Field(
        description=(
            "`shown_verbatim`: the context already shows it whole (in L1); `already_promoted`; "
            "`not_found`: no message with this seq."
        )
    )


class PromotePublic(BaseModel):
    added: list[int]
    promoted_seqs: list[int]
    promoted_tokens: int
    usage: float
    skipped: list[PromoteSkip] = Field(
        default_factory=list,
        description=("Requested seqs that were not added, each with the reason."),
    )


class ClearedPublic(BaseModel):
    cleared: int


class CompressPublic(BaseModel):
    enqueued: bool = False
    summaries_written: int = 0
    memory: MemoryPublic | None = None

"""Context API schemas."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ContextRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["anthropic", "openai", "raw"] = "anthropic"


class CompressionState(BaseModel):
    pending: bool = Field(description="A compression round is due but not yet stored.")
    triggers: list[str]
    stand_in_ranges: list[list[int]] = Field(
        description="[start_seq, end_seq] shown with a heuristic stand-in summary.")
    dropped_summaries: int = Field(description="Stored L2 summaries left out to fit.")
    dropped_promoted: list[int]
    dropped_blocks: list[str]
    omitted_seqs: list[int]
    truncated_seqs: list[int]
    decisions: list[str]


class ContextPublic(BaseModel):
    format: str
    system: Any = Field(default=None, description="anthropic: system blocks (cache_control "
                                                  "on ROM and Kernel).")
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    layers: dict[str, Any] | None = Field(default=None, description="raw: every layer.")
    tokens: dict[str, int] = Field(description="Tokens per layer.")
    total_tokens: int
    budget: int
    usage: float = Field(description="total_tokens / budget (never above 1).")
    l1_seqs: list[int]
    compression: CompressionState

"""The built context of a session (`POST /v1/sessions/{id}/context`)."""

from __future__ import annotations

from typing import Any

from loom_client.models._base import ResponseModel


class RecallHit(ResponseModel):
    seq: int
    score: float


class Recall(ResponseModel):
    """What automatic recall searched for and placed in the context."""

    query: str
    seqs: list[int]
    hits: list[RecallHit]


class CompressionState(ResponseModel):
    pending: bool
    triggers: list[str]
    stand_in_ranges: list[list[int]]
    dropped_summaries: int
    dropped_promoted: list[int]
    dropped_blocks: list[str]
    omitted_seqs: list[int]
    truncated_seqs: list[int]
    decisions: list[str]


class ContextResponse(ResponseModel):
    """A built context: the provider payload (`system`, `messages`, `tools`; `layers` for
    `raw`) and its accounting (tokens per layer, usage of the budget, recall, compression)."""

    format: str
    system: Any = None
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    layers: dict[str, Any] | None = None
    tokens: dict[str, int]
    total_tokens: int
    budget: int
    usage: float
    l1_seqs: list[int]
    recall: Recall | None = None
    compression: CompressionState

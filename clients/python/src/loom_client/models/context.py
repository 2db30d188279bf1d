"""The built context of a session (`POST /v1/sessions/{id}/context`)."""

from __future__ import annotations

from typing import Any

from loom_client.models._base import Page, ResponseModel


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

    context_id: str  # this build's id (a recorded build is read under /contexts/{id})
    recorded: bool = False
    manifest: dict[str, Any] | None = None  # `raw`, or `manifest=True`
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


class ContextSummary(ResponseModel):
    """One recorded build in a session's context history."""

    context_id: str
    created_at: str
    format: str
    budget: int
    total_tokens: int
    usage: float
    tokens: dict[str, int]
    blocks: int
    sha256: dict[str, str]


class ContextList(Page):
    items: list[ContextSummary]


class ContextManifest(ResponseModel):
    """What the model saw in one build, block by block, and why (see the API reference)."""

    context_id: str
    session_id: str
    created_at: str
    format: str
    budget: int
    total_tokens: int
    usage: float
    tokens: dict[str, int]
    tokenizer: dict[str, str]
    versions: dict[str, Any]
    config_sha256: str
    blocks: list[dict[str, Any]]
    decisions: list[dict[str, Any]]
    sha256: dict[str, str]


class ContextReplay(ResponseModel):
    """A recorded build rendered again from its sources (the same SHA-256)."""

    context_id: str
    format: str
    sha256: str
    system: Any = None
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    layers: dict[str, Any] | None = None


class ContextDiff(ResponseModel):
    """Blocks added, removed and changed from build `a` to build `b`, with token deltas."""

    a: str
    b: str
    added: list[dict[str, Any]]
    removed: list[dict[str, Any]]
    changed: list[dict[str, Any]]
    unchanged: int
    token_delta: int
    layer_token_deltas: dict[str, int]

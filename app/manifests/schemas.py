"""API schemas of context manifests (`app.manifests.record` makes the data)."""

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class ManifestBlock(BaseModel):
    position: int = Field(
        description="Where the model reads it (0 first): system text "
        "(ROM, Kernel, blocks, L2, recall note), then messages."
    )
    key: str = Field(
        description="What the block stands for, the same in every build: "
        "`rom`, `kernel`, `block:<name>`, `summary:<id>`, "
        "`stand_in:<a>-<b>`, `gap:<a>-<b>`, `recall_note`, "
        "`msg:<seq>`."
    )
    layer: str = Field(description="rom, kernel, block, l2, recalled, promoted or l1.")
    name: str | None = Field(description="A provider block's name (facts, knowledge, learned).")
    tokens: int
    cache_control: dict[str, str] | None
    sources: list[dict[str, Any]] = Field(
        description=(
            "What the block was made from: message seqs; summary ids and versions; fact and "
            "memory-item ids, versions and scores; the learned version; recall hits with the "
            "query and score; ROM and Kernel hashes."
        )
    )
    why: str = Field(description="Why the block is there.")
    truncated_to: int | None = Field(description="A message cut to this many tokens.")
    tool_calls_left_out: list[str] = Field(
        description=("Tool calls of the message left out (their results are not in the context).")
    )
    replay: dict[str, Any] | None = Field(
        description=("A provider block's rendering inputs (its share, the tokens it was offered).")
    )


class ManifestDecision(BaseModel):
    action: str = Field(description="dropped, omitted, shrunk or stand_in.")
    layer: str
    keys: list[str]
    range: list[int] | None = Field(description="[start_seq, end_seq] of a summary.")
    tokens: int | None
    why: str


class ManifestVersions(BaseModel):
    rom_profile_version: int | None = Field(
        description="The agent profile version the session's ROM froze (null: inline)."
    )
    rom_sha256: str
    kernel_sha256: str
    memory_state_version: int


class ManifestPublic(BaseModel):
    manifest_version: int
    context_id: uuid.UUID
    session_id: uuid.UUID
    agent_id: str
    created_at: str = Field(description="When the build ran (RFC 3339).")
    format: str = Field(description="The format the build answered in.")
    budget: int
    total_tokens: int
    usage: float
    tokens: dict[str, int] = Field(description="Tokens per layer.")
    tokenizer: dict[str, str] = Field(description="The tokenizer's name and versions.")
    versions: ManifestVersions
    config_sha256: str = Field(
        description="SHA-256 of the session config and the request's build options."
    )
    blocks: list[ManifestBlock]
    decisions: list[ManifestDecision] = Field(description="What was dropped or shrunk, why.")
    policy_notes: list[str] = Field(description="The memory policy's own notes of the fit.")
    sha256: dict[str, str] = Field(
        description=(
            "SHA-256 of the rendered bytes per format (anthropic, openai, raw): the canonical "
            "JSON of `system`, `messages`, `tools` and `layers` (null but for raw), sorted keys. "
            "A recorded build stores the hash of the format it answered in; the others are "
            "computed when it is read, by replaying its sources (listed in `sha256_replayed`; "
            "left out when a source changed or was erased since)."
        )
    )
    sha256_replayed: list[str] = Field(
        description=(
            "Formats whose hash was computed from the sources on this read, not at the build."
        )
    )


class ContextSummaryPublic(BaseModel):
    """One recorded build in a session's history."""

    context_id: uuid.UUID
    created_at: datetime
    format: str
    budget: int
    total_tokens: int
    usage: float
    tokens: dict[str, int]
    blocks: int = Field(description="How many blocks the model read.")
    sha256: dict[str, str]


class ContextList(BaseModel):
    items: list[ContextSummaryPublic]
    next_cursor: str | None


class ReplayPublic(BaseModel):
    context_id: uuid.UUID
    format: str
    sha256: str = Field(description="SHA-256 of the re-rendered bytes: the recorded one.")
    system: Any = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    layers: dict[str, Any] | None = None


class BlockChangePublic(BaseModel):
    key: str
    layer: str
    tokens: int
    position: int | None
    token_delta: int


class BlockChangedPublic(BaseModel):
    key: str
    layer_a: str
    layer_b: str
    tokens_a: int
    tokens_b: int
    token_delta: int
    fields: list[str] = Field(description="What differs: layer, tokens, sources, ...")


class ContextDiffPublic(BaseModel):
    a: uuid.UUID
    b: uuid.UUID
    added: list[BlockChangePublic] = Field(description="Blocks in b only, in b's order.")
    removed: list[BlockChangePublic] = Field(description="Blocks in a only, in a's order.")
    changed: list[BlockChangedPublic]
    unchanged: int
    token_delta: int = Field(description="Tokens of b's blocks minus a's.")
    layer_token_deltas: dict[str, int]
    total_tokens_a: int
    total_tokens_b: int
    budget_a: int
    budget_b: int
    same_bytes: dict[str, bool] = Field(description="Per format: both rendered the same bytes.")
    config_changed: bool

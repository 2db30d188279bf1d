"""Context API schemas."""

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.core.strict import JsonFloat, JsonInt
from app.core.times import AS_OF_DOC, AsOf
from app.memory.recall_choice import (
    AUTO_BASE_SHARE,
    AUTO_KEEP,
    AUTO_MAX_SHARE,
    DEFAULT_MAX_MESSAGES,
    MAX_MESSAGES,
    MAX_SHARE,
)
from app.search.query import MAX_QUERY_CHARS


class RecallInput(BaseModel):
    """Automatic recall: each context build searches the session's swap and places the
    best old turns (whole tool groups) between the summaries and L1, marked as recalled.
    Recall spends only what the rest of the context leaves free: it is the first thing to
    shrink, and never pushes anything else out."""

    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = Field(
        default=True, description="false turns recall off (e.g. for one request)."
    )
    share: Annotated[JsonFloat, Field(gt=0, le=MAX_SHARE)] | None = Field(
        default=None,
        description=(
            "Most of the budget recalled messages may take (with their note). Default (null): "
            f"adaptive: the best hits may take {AUTO_BASE_SHARE:.0%} of the budget, and hits "
            f"scoring at least {AUTO_KEEP:.0%} of the best one up to {AUTO_MAX_SHARE:.0%}, "
            "within what the rest of the context leaves free."
        ),
    )
    max_messages: Annotated[JsonInt, Field(ge=1, le=MAX_MESSAGES)] | None = Field(
        default=None,
        description=(
            "Most messages recalled, tool partners included. Default (null): "
            f"{MAX_MESSAGES} with the adaptive share, {DEFAULT_MAX_MESSAGES} with a fixed one."
        ),
    )
    query: str | None = Field(
        default=None,
        max_length=MAX_QUERY_CHARS,
        description=("What to search for. Default: the text of the newest user message."),
    )


class ContextRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["anthropic", "openai", "raw"] = "anthropic"
    recall: RecallInput | None = Field(
        default=None,
        description=("Recall for this build, instead of the session's `config.recall`."),
    )
    facts_as_of: AsOf | None = Field(
        default=None,
        description=(
            "The facts block shows the facts true at this time (default: now). " + AS_OF_DOC
        ),
    )
    record: StrictBool | None = Field(
        default=None,
        description=(
            "Record this build's manifest (true) or not (false), instead of the session's "
            "`config.audit`. A recorded build is listed under GET /v1/sessions/{id}/contexts."
        ),
    )
    manifest: StrictBool = Field(
        default=False,
        description=("Return the build's manifest in the response (`raw` always returns it)."),
    )


class RecallHitPublic(BaseModel):
    seq: int
    score: float = Field(description="The conversation-aware BM25 score of the hit.")


class RecallPublic(BaseModel):
    query: str = Field(description="The text that was searched.")
    seqs: list[int] = Field(
        description="Every recalled message, tool partners included, in the order they appear."
    )
    hits: list[RecallHitPublic] = Field(description="The search hits recalled, best first.")


class CompressionState(BaseModel):
    pending: bool = Field(description="A compression round is due but not yet stored.")
    triggers: list[str]
    stand_in_ranges: list[list[int]] = Field(
        description="[start_seq, end_seq] shown with a heuristic stand-in summary."
    )
    dropped_summaries: int = Field(description="Stored L2 summaries left out to fit.")
    dropped_promoted: list[int]
    dropped_blocks: list[str]
    omitted_seqs: list[int]
    truncated_seqs: list[int]
    decisions: list[str]


# --- the manifest of a build (`app.manifests.record` makes it) ---


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


class ContextPublic(BaseModel):
    context_id: uuid.UUID = Field(
        description=(
            "This build's id. Recorded builds (`recorded`) are read, replayed and diffed under "
            "/v1/sessions/{id}/contexts/{context_id}."
        )
    )
    recorded: bool = Field(
        description=("The manifest was stored (the session's `config.audit`, or `record: true`).")
    )
    manifest: ManifestPublic | None = Field(
        default=None,
        description=("What the model saw and why (`raw`, or `manifest: true`; null otherwise)."),
    )
    format: str
    system: Any = Field(
        default=None, description="anthropic: system blocks (cache_control on ROM and Kernel)."
    )
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    layers: dict[str, Any] | None = Field(default=None, description="raw: every layer.")
    tokens: dict[str, int] = Field(description="Tokens per layer.")
    total_tokens: int
    budget: int
    usage: float = Field(description="total_tokens / budget (never above 1).")
    l1_seqs: list[int]
    recall: RecallPublic | None = Field(
        default=None,
        description=(
            "What automatic recall searched and placed (null when recall is off or found no room)."
        ),
    )
    compression: CompressionState

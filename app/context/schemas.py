"""Context API schemas."""

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.core.strict import JsonFloat, JsonInt
from app.facts.times import AS_OF_DOC, AsOf
from app.manifests.schemas import ManifestPublic
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

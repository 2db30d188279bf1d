"""API schemas of recorded context builds: their list, replay and diff. The manifest itself
(`ManifestPublic`, made by `app.manifests.record`) is part of a context response, so its
schema is the context's (`app.context.schemas`)."""

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


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

"""API schemas for knowledge items, context packages and the learned layer."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.core.pagination import CURSOR_DESCRIPTION, CURSOR_SCHEMA
from app.knowledge.filters import DEFAULT_LIMIT, DEFAULT_ORDER, MAX_LIMIT
from app.knowledge.scopes import SCOPE_ID_PATTERN, SCOPE_PATTERN, ScopeError, parse_scope

FILTERS_DOC = (
    "Field -> value (exact; a list = any of; for `tags` any of) or {operator: value} with "
    "operators $eq $ne $gt $gte $lt $lte. Fields: id, scope, kind, source, text, tags, "
    "importance, token_cost, created_at (alias timestamp), updated_at.")


def _check_scope(v: str) -> str:
    try:
        return str(parse_scope(v))
    except ScopeError as exc:
        raise ValueError(str(exc)) from exc


class MemoryItemCreate(BaseModel):
    """A knowledge item. Give `text`, `payload` or both; the token cost is computed."""

    model_config = ConfigDict(extra="forbid")

    scope: str = Field(pattern=SCOPE_PATTERN, description="`task/<id>`, `project/<id>` or "
                       "`global`.", examples=["project/checkout"])
    kind: str = Field(min_length=1, max_length=100, examples=["decision"])
    source: str | None = Field(default=None, max_length=200,
                               description="Who or what produced it. Default: the caller's "
                                           "agent id, else `api`.")
    tags: list[str] = Field(default_factory=list, max_length=64)
    importance: float = Field(default=0.5, ge=0, le=1)
    text: str | None = Field(default=None, max_length=1_000_000)
    payload: Any = None

    _scope = field_validator("scope")(_check_scope)

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        if any(not t or len(t) > 100 for t in v):
            raise ValueError("tags are 1-100 characters each")
        return list(dict.fromkeys(v))

    @model_validator(mode="after")
    def _content(self) -> MemoryItemCreate:
        if not self.text and self.payload is None:
            raise ValueError("give text, payload or both")
        return self


class MemoryItemPublic(BaseModel):
    id: uuid.UUID
    scope: str
    kind: str
    source: str
    tags: list[str]
    importance: float
    text: str | None
    payload: Any
    token_cost: int = Field(description="Tokens of the item as rendered in a context (cl100k).")
    created_at: datetime
    updated_at: datetime


class MemoryItemQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    filters: dict[str, Any] = Field(default_factory=dict, description=FILTERS_DOC)
    order_by: str = Field(default=DEFAULT_ORDER, description=(
        "A field sorts descending; prefix `-` for ascending (the seed's convention). "
        "Ties are broken by id."), examples=["-importance"])
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    cursor: str | None = Field(default=None, description=CURSOR_DESCRIPTION,
                               json_schema_extra=CURSOR_SCHEMA)


class MemoryItemList(BaseModel):
    items: list[MemoryItemPublic]
    next_cursor: str | None


class PromoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN, description=(
        "Target project; required when promoting a task item."))


class TaskComplete(BaseModel):
    model_config = ConfigDict(extra="forbid")

    promote: list[uuid.UUID] = Field(default_factory=list, max_length=10_000,
                                     description="Items of this task to move to the project.")
    project_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)

    @model_validator(mode="after")
    def _project(self) -> TaskComplete:
        if self.promote and self.project_id is None:
            raise ValueError("project_id is required to promote items")
        return self


class TaskCompleteResult(BaseModel):
    task_id: str
    promoted: list[uuid.UUID]
    cleared: int = Field(description="Task items removed (not promoted).")
    evicted: int = Field(description="Project items evicted because the project passed "
                                     "max_items after the promotion.")


class ClearRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: str = Field(pattern=SCOPE_PATTERN,
                       description="`task/<id>`, `project/<id>` or `global`.")
    confirm: bool = Field(default=False, description="Must be true to clear `global`.")
    filters: dict[str, Any] = Field(default_factory=dict, description="Only clear matching "
                                    "items. " + FILTERS_DOC)

    _scope = field_validator("scope")(_check_scope)


class ClearResult(BaseModel):
    scope: str
    removed: int


class TierSharesIn(BaseModel):
    """Fractions of the budget per tier; each 0-1, summing to at most 1."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    task: float = Field(default=0.4, ge=0, le=1)
    project: float = Field(default=0.4, ge=0, le=1)
    global_: float = Field(default=0.2, ge=0, le=1, alias="global")

    @model_validator(mode="after")
    def _sum(self) -> TierSharesIn:
        if self.task + self.project + self.global_ > 1 + 1e-9:
            raise ValueError("shares must sum to at most 1")
        return self


class ContextPackageCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)
    project_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)
    include_global: bool = True
    budget_tokens: int = Field(ge=1, le=10_000_000)
    shares: TierSharesIn = Field(default_factory=TierSharesIn)
    head_tail: int | None = Field(default=None, ge=0, le=1000, description=(
        "Keep the N oldest and N newest items of each tier first, then fill by importance."))
    filters: dict[str, Any] = Field(default_factory=dict, description=(
        "Only consider matching items. " + FILTERS_DOC))


class TierUsagePublic(BaseModel):
    allowance: int = Field(description="floor(budget_tokens * share)")
    used_tokens: int
    candidate_tokens: int
    candidate_count: int
    included_count: int


class PackageItem(MemoryItemPublic):
    tier: str


class ContextPackagePublic(BaseModel):
    budget_tokens: int
    used_tokens: int = Field(description="Sum of the included items' token_cost.")
    compression_ratio: float = Field(description=(
        "Included tokens / tokens of all candidate items (1.0 when there were none)."))
    tiers: dict[str, TierUsagePublic]
    items: list[PackageItem] = Field(description="Task, then project, then global items.")
    text: str = Field(description="The items rendered as a context block.")


class LearnedContent(BaseModel):
    """DSPy-style optimisation results for one agent."""

    model_config = ConfigDict(extra="forbid")

    signatures: dict[str, Any] = Field(default_factory=dict)
    demonstrations: list[Any] = Field(default_factory=list)
    tuned_prompts: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class LearnedPublic(LearnedContent):
    agent_id: str
    version: int = Field(description="The version shown.")
    active_version: int
    latest_version: int
    created_at: datetime


class LearnedRollback(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to_version: int | None = Field(default=None, ge=1, le=2**31 - 1, description=(
        "Version to make active; default: the one before the active version."))


class SessionKnowledgeConfig(BaseModel):
    """Per-session knowledge and learned blocks (both off unless configured)."""

    model_config = ConfigDict(extra="forbid")

    project_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)
    task_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)
    include_global: bool = True
    share: float = Field(default=0.10, ge=0, le=1, description=(
        "Fraction of the session budget the knowledge block may use."))
    shares: TierSharesIn = Field(default_factory=TierSharesIn)
    head_tail: int | None = Field(default=None, ge=0, le=1000)
    learned: bool = Field(default=False, description="Add the agent's active learned version.")
    learned_share: float = Field(default=0.05, ge=0, le=1)

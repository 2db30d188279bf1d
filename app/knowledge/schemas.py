"""API schemas for knowledge items (their versions and corrections), context packages and
the learned layer. The facts' own schemas (search, forget, extraction) are
`app.facts.schemas`; `FactsInput`, the per-session facts setting, stays here beside
`SessionKnowledgeConfig`, which sessions and profiles compose."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from app.core.pagination import CURSOR_DESCRIPTION, CURSOR_SCHEMA
from app.core.strict import JSON_INT, JsonAwareDatetime, JsonFloat, JsonInt
from app.core.times import AS_OF_DOC, AsOf
from app.knowledge.filters import (
    ALIASES,
    DEFAULT_LIMIT,
    DEFAULT_ORDER,
    FIELDS,
    MAX_LIMIT,
    OPERATORS,
    FieldSpec,
)
from app.knowledge.scopes import SCOPE_ID_PATTERN, SCOPE_PATTERN, ScopeError, parse_scope

FILTERS_DOC = (
    "Field -> value (exact; a list = any of; for `tags` any of) or {operator: value} with "
    "operators $eq $ne $gt $gte $lt $lte. Fields: id, scope, kind, source, text, tags, "
    "importance, token_cost, created_at (alias timestamp), updated_at."
)


_NUM = 2**31 - 1
# RFC 3339 as datetime.fromisoformat reads it: upper-case T and Z, no leap second, years 2-9998.
_DATETIME = {
    "type": "string",
    "format": "date-time",
    "pattern": (
        r"^(?!0001-|9999-)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:(?!60)[0-9]{2}"
        r"(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})$"
    ),
}
_SCALARS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "tags": {"type": "string"},
    "scope": {"type": "string", "pattern": SCOPE_PATTERN},
    "float": {"type": "number", "minimum": -_NUM, "maximum": _NUM},
    "int": {"type": "number", "minimum": -_NUM, "maximum": _NUM},
    "uuid": {"type": "string", "format": "uuid"},
    "datetime": _DATETIME,
}
_ORDERED_TYPES = ("float", "int", "datetime", "uuid")


def _filter_value_schema(spec: FieldSpec) -> dict[str, Any]:
    scalar = _SCALARS[spec.type]
    listed = {"type": "array", "minItems": 1, "items": scalar}
    equal = [scalar, listed] + ([{"type": "null"}] if spec.nullable else [])
    ops: dict[str, Any] = {"$eq": {"anyOf": equal}, "$ne": {"anyOf": equal}}
    if spec.type in _ORDERED_TYPES:
        ops.update({op: scalar for op in OPERATORS if op not in ("$eq", "$ne")})
    operators = {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "properties": ops,
    }
    return {"anyOf": [*equal, operators]}


def filters_schema() -> dict[str, Any]:
    """The JSON Schema of `filters`, from the same table the parser uses (filters.FIELDS)."""
    props = {name: _filter_value_schema(spec) for name, spec in FIELDS.items()}
    props.update({alias: props[target] for alias, target in ALIASES.items()})
    return {"type": "object", "properties": props, "additionalProperties": False}


ORDER_BY_VALUES = sorted(
    p + name
    for name in [*(f for f, s in FIELDS.items() if s.orderable), *ALIASES]
    for p in ("", "-")
)
FILTERS_SCHEMA: JsonDict = filters_schema()


def _check_scope(v: str) -> str:
    try:
        return str(parse_scope(v))
    except ScopeError as exc:
        raise ValueError(str(exc)) from exc


class MemoryItemCreate(BaseModel):
    """A knowledge item. Give `text`, `payload` or both; the token cost is computed."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {"required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}}},
                {"required": ["payload"], "properties": {"payload": {"not": {"type": "null"}}}},
            ]
        },
    )

    scope: str = Field(
        pattern=SCOPE_PATTERN,
        description="`task/<id>`, `project/<id>`, "
        "`global`, `agent` (private to the caller's agent; also written "
        "`agent/<agent_id>`) or `user/<user_id>` (facts about one person).",
        examples=["project/checkout"],
    )
    kind: str = Field(min_length=1, max_length=100, examples=["decision"])
    source: str | None = Field(
        default=None,
        max_length=200,
        description="Who or what produced it. Default: the caller's agent id, else `api`.",
    )
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=64
    )
    importance: JsonFloat = Field(default=0.5, ge=0, le=1)
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
    version: int = Field(
        1, description="1, plus one per change (GET .../history); the ETag of `PATCH`'s If-Match."
    )
    valid_from: datetime | None = Field(
        None,
        description=(
            "When it became true: for a fact, the event time the message gave, else the "
            "message's time; for an item written by hand, when it was written."
        ),
    )
    invalid_at: datetime | None = Field(
        None,
        description=(
            "Facts: when a later message contradicted it (then left out of queries, packages, "
            "search and context unless include_invalidated=true)."
        ),
    )
    superseded_by: uuid.UUID | None = Field(None, description="Facts: the fact replacing it.")
    source_session_id: uuid.UUID | None = Field(
        None, description=("Facts: the session it was extracted from.")
    )
    source_seqs: list[int] = Field(
        default_factory=list, description=("Facts: the seqs of the messages it came from.")
    )
    key: str | None = Field(
        None, description=("Facts: what it is about, as subject.attribute (`user.home_city`).")
    )
    stated_at: datetime | None = Field(
        None, description=("Facts: when it was said (the latest message stating it).")
    )
    sources: list[dict[str, Any]] = Field(
        default_factory=list,
        description=("Facts: every statement supporting it, `[{session_id, seqs}]`."),
    )


class MemoryItemQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    filters: dict[str, Any] = Field(
        default_factory=dict, description=FILTERS_DOC, json_schema_extra=FILTERS_SCHEMA
    )
    order_by: str = Field(
        default=DEFAULT_ORDER,
        json_schema_extra={"enum": [*ORDER_BY_VALUES]},
        description=(
            "A field sorts descending; prefix `-` for ascending (the seed's convention). "
            "Ties are broken by id."
        ),
        examples=["-importance"],
    )
    limit: JsonInt = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    cursor: str | None = Field(
        default=None, description=CURSOR_DESCRIPTION, json_schema_extra=CURSOR_SCHEMA
    )


class MemoryItemList(BaseModel):
    items: list[MemoryItemPublic]
    next_cursor: str | None


class PromoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project_id: str | None = Field(
        default=None,
        pattern=SCOPE_ID_PATTERN,
        description=(
            "Target project; required when promoting a task item (409 cannot_promote without "
            "it, as for a global item, which has no tier above)."
        ),
    )


class TaskComplete(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "if": {"properties": {"promote": {"minItems": 1}}, "required": ["promote"]},
            "then": {"required": ["project_id"], "properties": {"project_id": {"type": "string"}}},
        },
    )

    promote: list[uuid.UUID] = Field(
        default_factory=list,
        max_length=10_000,
        description="Items of this task to move to the project.",
    )
    project_id: str | None = Field(
        default=None, pattern=SCOPE_ID_PATTERN, description="Required when `promote` is not empty."
    )

    @model_validator(mode="after")
    def _project(self) -> TaskComplete:
        if self.promote and self.project_id is None:
            raise ValueError("project_id is required to promote items")
        return self


class TaskCompleteResult(BaseModel):
    task_id: str
    promoted: list[uuid.UUID]
    cleared: int = Field(description="Task items removed (not promoted).")
    evicted: int = Field(
        description="Project items evicted because the project passed "
        "max_items after the promotion."
    )


class ClearRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "if": {"properties": {"scope": {"const": "global"}}, "required": ["scope"]},
            "then": {"required": ["confirm"], "properties": {"confirm": {"const": True}}},
        },
    )

    scope: str = Field(
        pattern=SCOPE_PATTERN, description="`task/<id>`, `project/<id>`, `global` or `agent`."
    )
    confirm: StrictBool = Field(default=False, description="Must be true to clear `global`.")
    filters: dict[str, Any] = Field(
        default_factory=dict,
        description="Only clear matching items. " + FILTERS_DOC,
        json_schema_extra=FILTERS_SCHEMA,
    )

    _scope = field_validator("scope")(_check_scope)


class ClearResult(BaseModel):
    scope: str
    removed: int


class TierSharesIn(BaseModel):
    """Fractions of the budget per tier; each 0-1, summing to at most 1 (422 otherwise)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    task: JsonFloat = Field(default=0.4, ge=0, le=1)
    project: JsonFloat = Field(default=0.4, ge=0, le=1)
    global_: JsonFloat = Field(default=0.2, ge=0, le=1, alias="global")

    @model_validator(mode="after")
    def _sum(self) -> TierSharesIn:
        if self.task + self.project + self.global_ > 1 + 1e-9:
            raise ValueError("shares must sum to at most 1")
        return self


class ContextPackageCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)
    project_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)
    include_global: StrictBool = True
    budget_tokens: JsonInt = Field(ge=1, le=10_000_000)
    shares: TierSharesIn = Field(default_factory=TierSharesIn)
    head_tail: Annotated[int, Field(ge=0, le=1000), JSON_INT] | None = Field(
        default=None,
        description=(
            "Keep the N oldest and N newest items of each tier first, then fill by importance."
        ),
    )
    filters: dict[str, Any] = Field(
        default_factory=dict,
        description=("Only consider matching items. " + FILTERS_DOC),
        json_schema_extra=FILTERS_SCHEMA,
    )
    as_of: AsOf | None = Field(
        default=None,
        description=(
            "The items true at this time (world time), each as it read then; default: now. "
            + AS_OF_DOC
        ),
    )


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
    compression_ratio: float = Field(
        description=("Included tokens / tokens of all candidate items (1.0 when there were none).")
    )
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

    to_version: Annotated[int, Field(ge=1, le=2**31 - 1), JSON_INT] | None = Field(
        default=None,
        description=("Version to make active; default: the one before the active version."),
    )


class SessionKnowledgeConfig(BaseModel):
    """Per-session knowledge and learned blocks (both off unless configured)."""

    model_config = ConfigDict(extra="forbid")

    project_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)
    task_id: str | None = Field(default=None, pattern=SCOPE_ID_PATTERN)
    include_global: StrictBool = True
    share: JsonFloat = Field(
        default=0.10,
        ge=0,
        le=1,
        description=("Fraction of the session budget the knowledge block may use."),
    )
    shares: TierSharesIn = Field(default_factory=TierSharesIn)
    head_tail: Annotated[int, Field(ge=0, le=1000), JSON_INT] | None = Field(default=None)
    learned: StrictBool = Field(
        default=False, description="Add the agent's active learned version."
    )
    learned_share: JsonFloat = Field(default=0.05, ge=0, le=1)


# an item's `key` (facts: what it is about, subject.attribute in lowercase)
KEY_PATTERN = r"^[a-z0-9_]{1,60}(\.[a-z0-9_]{1,60}){0,4}$"

FACTS_SCOPE_PATTERN = (
    r"^(global|agent|user|(task|project)/[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}"
    r"|user/[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199})$"
)


class FactsInput(BaseModel):
    """Durable facts: extracted from this session's messages after each
    compression (or on demand) into `scope`, and the best-matching valid ones placed in the
    context after ROM and Kernel within `share` of the budget."""

    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = Field(default=False, description="Off unless true.")
    scope: str = Field(
        default="agent",
        pattern=FACTS_SCOPE_PATTERN,
        description=(
            "Where facts are kept: `agent` (private to the session's agent), `user` (the "
            "session's user: `user/<user_id>`; a session without a user keeps them in its "
            "agent's tier), `global`, `task/<id>` or `project/<id>`."
        ),
    )
    share: JsonFloat = Field(
        default=0.05,
        ge=0,
        le=0.5,
        description=("Most of the budget the facts block may take (it shrinks before L1 does)."),
    )
    min_batch: Annotated[int, Field(ge=1, le=10_000), JSON_INT] | None = Field(
        default=None,
        description=(
            "New messages that start an extraction at once (default LOOM_FACTS_EVERY_MESSAGES, "
            "6); fewer are extracted after LOOM_FACTS_QUIET_SECONDS (60) without a new "
            "message."
        ),
    )


class MemoryItemVersionPublic(BaseModel):
    version: int
    change: str = Field(
        description="add, update, invalidate, forget, confirm (a statement "
        "joined its provenance), edit (PATCH), delete, promote, unsupport (a deleted "
        "session's support removed) or restore (true again: what replaced it was deleted)."
    )
    text: str | None
    importance: float
    tags: list[str]
    valid_from: datetime | None
    invalid_at: datetime | None
    superseded_by: uuid.UUID | None
    source_session_id: uuid.UUID | None
    source_seqs: list[int]
    reason: str | None
    changed_at: datetime
    key: str | None = None
    stated_at: datetime | None = None
    sources: list[dict[str, Any]] = Field(default_factory=list)
    actor: str | None = Field(None, description="Who: extraction, api, mcp or tool.")
    actor_key_id: uuid.UUID | None = Field(None, description="The API key that made it.")
    actor_agent_id: str | None = Field(None, description="The agent acting.")


class MemoryItemHistory(BaseModel):
    item: MemoryItemPublic = Field(description="The item as it is now.")
    versions: list[MemoryItemVersionPublic] = Field(description="Oldest first.")
    superseded_by: MemoryItemPublic | None = Field(
        default=None,
        description=("The fact that replaced this one (when it was invalidated by a newer fact)."),
    )
    supersedes: list[MemoryItemPublic] = Field(
        default_factory=list, description=("The facts this one replaced.")
    )
    as_of: datetime | None = Field(None, description="The `as_of` asked, if any.")
    as_of_version: MemoryItemVersionPublic | None = Field(
        None,
        description=("With `as_of`: the version in effect then (null: not true at that time)."),
    )


class MemoryItemUpdate(BaseModel):
    """A correction: only the fields given change (`invalid_at: null` makes an invalid item
    valid again). The change is a version `edit` with `reason`, the caller's key and
    agent."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    # not nullable; a field left out keeps its value (only `model_fields_set` applies, so
    # these defaults are never written)
    text: str = Field(default="", min_length=1, max_length=1_000_000)
    importance: JsonFloat = Field(default=0.0, ge=0, le=1)
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=64
    )
    key: str | None = Field(
        default=None,
        pattern=KEY_PATTERN,
        max_length=200,
        description=("Facts: what it is about (`user.home_city`)."),
    )
    valid_from: JsonAwareDatetime | SkipJsonSchema[None] = Field(
        default=None, description=("When it became true.")
    )
    invalid_at: JsonAwareDatetime | None = Field(
        default=None, description=("When it stopped being true (null: it is true again).")
    )
    reason: Annotated[str, Field(min_length=1, max_length=1000)] | SkipJsonSchema[None] = Field(
        default=None, description="Why (kept in the history). Default: `edited`."
    )

    @model_validator(mode="after")
    def _something(self) -> MemoryItemUpdate:
        changed = self.model_fields_set - {"reason"}
        if not changed:
            raise ValueError(
                "give at least one of text, importance, tags, key, valid_from, invalid_at"
            )
        if "valid_from" in changed and self.valid_from is None:
            raise ValueError("valid_from cannot be null")
        if (
            self.valid_from is not None
            and self.invalid_at is not None
            and self.invalid_at < self.valid_from
        ):
            raise ValueError("invalid_at is before valid_from")
        return self

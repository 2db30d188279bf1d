import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from app.auth.schemas import AGENT_ID_PATTERN
from app.context.schemas import RecallInput
from app.core.strict import JSON_INT, JsonFloat, JsonInt
from app.knowledge.schemas import FactsInput, SessionKnowledgeConfig
from app.memory.policy import (
    DEFAULT_L1_MAX_MESSAGES,
    DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MAX_L2_TOKENS,
    DEFAULT_RESERVED_OUTPUT_TOKENS,
    MIN_BUDGET_TOKENS,
    MemoryConfig,
)
from app.memory.schemas import LayerTokens, RomInput


# Defaults and derived values (budget, reserve, L2 cap) come from
# `app.memory.policy.MemoryConfig`, the one source; this model only validates input.
class UserRecallInput(BaseModel):
    """Recall across the user's other sessions (`app.users.recall`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = Field(default=True, description="false turns it off.")
    share: JsonFloat = Field(
        default=0.05,
        gt=0,
        le=0.5,
        description=("Most of the budget the block may take (it shrinks before L1 does)."),
    )
    max_messages: JsonInt = Field(default=6, ge=1, le=50, description="Most turns shown.")


class SessionConfig(BaseModel):
    """Per-session memory configuration. An omitted or null field takes its default,
    scaled for small windows (the reserve is at most 10% of the window, the L2 cap at most
    a quarter of the budget)."""

    model_config = ConfigDict(extra="forbid")

    max_context_tokens: JsonInt = Field(default=DEFAULT_MAX_CONTEXT_TOKENS, ge=256, le=10_000_000)
    reserved_output_tokens: Annotated[int, Field(ge=0), JSON_INT] | None = Field(
        default=None,
        description="Tokens kept free for the answer; must be smaller than "
        "max_context_tokens, leaving a budget of at least "
        f"{MIN_BUDGET_TOKENS}. Default: {DEFAULT_RESERVED_OUTPUT_TOKENS:,}, but "
        "never more than 10% of the window.",
    )
    l1_max_messages: JsonInt = Field(default=DEFAULT_L1_MAX_MESSAGES, ge=2, le=1000)
    max_l2_tokens: Annotated[int, Field(ge=100, le=1_000_000), JSON_INT] | None = Field(
        default=None,
        description=f"L2 is archived as a snapshot past this many tokens. Default: "
        f"{DEFAULT_MAX_L2_TOKENS:,}, but never more than a quarter of the budget.",
    )
    knowledge: SessionKnowledgeConfig | None = Field(
        default=None, description=("Knowledge tiers and learned layer in this session's context.")
    )
    recall: RecallInput | None = Field(
        default=None,
        description=("Automatic recall of old turns into the context (off when null)."),
    )
    user_recall: UserRecallInput | None = Field(
        default=None,
        description=(
            "A session with a user: the best-matching turns of that user's other sessions with "
            "this agent, in a context block after the facts (off when null)."
        ),
    )
    facts: FactsInput | None = Field(
        default=None,
        description=(
            "Durable facts extracted from this session and shown in its context (off when "
            "null; a new session takes its agent profile's `facts`)."
        ),
    )
    audit: StrictBool | None = Field(
        default=None,
        description=(
            "Record every context build's manifest (what the model saw, and why), listed under "
            "GET /v1/sessions/{id}/contexts. Off when null or false; a new session takes its "
            "agent profile's `audit`."
        ),
    )

    @model_validator(mode="after")
    def _usable(self) -> "SessionConfig":
        if (
            self.reserved_output_tokens is not None
            and self.reserved_output_tokens >= self.max_context_tokens
        ):
            raise ValueError("reserved_output_tokens must be smaller than max_context_tokens")
        problems = self.policy().problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def policy(self) -> MemoryConfig:
        return MemoryConfig.from_stored(self.model_dump(include=set(MemoryConfig.STORED_KEYS)))


class SessionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str | None = Field(
        default=None,
        pattern=AGENT_ID_PATTERN,
        description="The session's agent. Agent keys: their own (may be omitted). Service keys: "
        "this field or X-Agent-Id.",
    )
    user_id: str | None = Field(
        default=None,
        pattern=AGENT_ID_PATTERN,
        description="The person the session is with: an opaque id, validated like agent "
        "ids. Set at creation only. Their facts live in the `user/<user_id>` "
        "knowledge tier; `DELETE /v1/users/{user_id}` erases all of it.",
    )
    config: SessionConfig = Field(default_factory=SessionConfig)
    metadata: dict[str, Any] = Field(default_factory=dict)
    rom: RomInput | None = Field(
        default=None,
        description="Inline ROM, frozen for the session's life. Default: the "
        "agent profile's current version.",
    )


class SessionUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] | None = Field(
        default=None, description="Config fields to change; others keep their values."
    )
    metadata: dict[str, Any] | None = Field(default=None, description="Replaces the metadata.")
    rom: Any = Field(default=None, description="ROM is frozen at creation: setting it is 409.")
    status: Literal["active", "ended"] | None = Field(
        default=None,
        description=(
            "`ended`: the conversation is over; its fact extraction runs at once instead "
            "of waiting for quiet. An append to an ended session reopens it (`active`)."
        ),
    )


class SessionPublic(BaseModel):
    id: uuid.UUID
    agent_id: str
    user_id: str | None = None
    config: SessionConfig
    metadata: dict[str, Any]
    message_count: int
    message_tokens: int
    budget: int
    memory: LayerTokens | None = Field(
        default=None, description="Tokens per layer (GET of one session, and the list)."
    )
    created_at: datetime
    updated_at: datetime
    status: Literal["active", "ended"] = Field(
        default="active",
        description="`active`, or `ended` (PATCH `status`; an append reopens the session).",
    )
    ended_at: datetime | None = Field(default=None, description="When it was ended.")


class SessionList(BaseModel):
    items: list[SessionPublic]
    next_cursor: str | None

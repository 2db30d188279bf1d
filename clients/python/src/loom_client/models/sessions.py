"""Sessions, their configuration and the messages of their history."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from loom_client.models._base import Page, RequestModel, ResponseModel


class TierShares(RequestModel):
    """Shares of a knowledge budget per tier (default 0.4 / 0.4 / 0.2)."""

    task: float | None = None
    project: float | None = None
    global_: float | None = Field(default=None, alias="global")


class RecallInput(RequestModel):
    """Automatic recall: old turns the newest message needs put back into the context."""

    enabled: bool | None = None
    query: str | None = None
    max_messages: int | None = None
    share: float | None = None


class SessionKnowledgeConfig(RequestModel):
    task_id: str | None = None
    project_id: str | None = None
    include_global: bool | None = None
    share: float | None = None
    shares: TierShares | None = None
    head_tail: int | None = None
    learned: bool | None = None
    learned_share: float | None = None


class UserRecallInput(RequestModel):
    """Recall across the session's user's other sessions with this agent."""

    enabled: bool | None = None
    share: float | None = None
    max_messages: int | None = None


class SessionConfig(RequestModel):
    """A session's configuration (fields left out keep the server's defaults)."""

    max_context_tokens: int | None = None
    reserved_output_tokens: int | None = None
    l1_max_messages: int | None = None
    max_l2_tokens: int | None = None
    recall: RecallInput | None = None
    user_recall: UserRecallInput | None = None
    knowledge: SessionKnowledgeConfig | None = None
    audit: bool | None = None  # record every context build's manifest


class RomInput(RequestModel):
    """The frozen system prompt (ROM) of a session."""

    system_prompt: str
    patterns: list[Any] | None = None
    backend_schema: Any = None


class LayerTokens(ResponseModel):
    rom: int
    kernel: int
    l1: int
    l2: int
    promoted: int
    total: int


class Session(ResponseModel):
    id: str
    agent_id: str
    user_id: str | None = None
    config: dict[str, Any]
    metadata: dict[str, Any]
    budget: int
    message_count: int
    message_tokens: int
    memory: LayerTokens | None = None
    created_at: datetime
    updated_at: datetime


class SessionList(Page):
    items: list[Session]


class MessageIn(RequestModel):
    """A message to append, in the Anthropic shape (tool_use / tool_result blocks) or the
    OpenAI shape (assistant `tool_calls`, role `tool` with `tool_call_id`)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    tool_use_id: str | None = None
    is_error: bool | None = None
    metadata: dict[str, Any] | None = None
    created_at: datetime | None = None


class Message(ResponseModel):
    """A stored message (canonical form) with its sequence number and token count."""

    session_id: str
    seq: int
    role: str
    content: Any
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_use_id: str | None = None
    is_error: bool = False
    metadata: dict[str, Any] = {}
    token_count: int
    created_at: datetime


class MessageList(Page):
    items: list[Message]


class MessagesAppended(ResponseModel):
    messages: list[Message]
    last_seq: int
    replayed: bool = False
    """True when an Idempotency-Key matched an earlier append: nothing was appended."""

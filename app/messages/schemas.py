import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool


class MessageIn(BaseModel):
    """A message in Anthropic shape (tool_use / tool_result blocks) or OpenAI shape
    (assistant `tool_calls`, role `tool` with `tool_call_id`)."""

    # A tool message names the call it answers (tool_call_id or tool_use_id).
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "if": {"properties": {"role": {"const": "tool"}}, "required": ["role"]},
        "then": {"anyOf": [
            {"required": ["tool_call_id"],
             "properties": {"tool_call_id": {"type": "string", "minLength": 1}}},
            {"required": ["tool_use_id"],
             "properties": {"tool_use_id": {"type": "string", "minLength": 1}}},
        ]},
    })

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = Field(default=None, max_length=200)
    tool_use_id: str | None = Field(default=None, max_length=200)
    is_error: StrictBool = False
    name: str | None = Field(default=None, max_length=200)
    metadata: dict[str, Any] | None = None


class MessagesAppend(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[MessageIn] = Field(min_length=1)


class MessagePublic(BaseModel):
    session_id: uuid.UUID
    seq: int
    role: str
    content: Any
    tool_calls: list[dict[str, Any]] | None = None
    tool_use_id: str | None = None
    is_error: bool = False
    name: str | None = None
    token_count: int
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime


class MessagesAppended(BaseModel):
    messages: list[MessagePublic]
    last_seq: int
    replayed: bool = Field(default=False,
                           description="True when this is the stored first result of a "
                                       "request retried with the same Idempotency-Key.")


class MessageList(BaseModel):
    items: list[MessagePublic]
    next_cursor: str | None

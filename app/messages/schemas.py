import uuid
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.core.strict import JsonAwareDatetime

# How far a given `created_at` may be ahead of the server's clock (the client's clock may
# run a little fast); later is refused (422 `created_at_in_future`).
MAX_CLOCK_SKEW = timedelta(minutes=5)


class MessageIn(BaseModel):
    """A message in Anthropic shape (tool_use / tool_result blocks) or OpenAI shape
    (assistant `tool_calls`, role `tool` with `tool_call_id`)."""

    # A tool message names the call it answers (tool_call_id or tool_use_id).
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "if": {"properties": {"role": {"const": "tool"}}, "required": ["role"]},
            "then": {
                "anyOf": [
                    {
                        "required": ["tool_call_id"],
                        "properties": {"tool_call_id": {"type": "string", "minLength": 1}},
                    },
                    {
                        "required": ["tool_use_id"],
                        "properties": {"tool_use_id": {"type": "string", "minLength": 1}},
                    },
                ]
            },
        },
    )

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = Field(default=None, max_length=200)
    tool_use_id: str | None = Field(default=None, max_length=200)
    is_error: StrictBool = False
    name: str | None = Field(default=None, max_length=200)
    metadata: dict[str, Any] | None = None
    created_at: JsonAwareDatetime | None = Field(
        default=None,
        examples=["2024-05-01T12:00:00Z"],
        description="When the message was originally written, for imported history: an RFC "
        "3339 date-time with a timezone (a time without one is 422), stored and "
        "returned in UTC to the microsecond. At most "
        f"{int(MAX_CLOCK_SKEW.total_seconds()) // 60} minutes after the server's "
        "clock (later is 422 `created_at_in_future`). Default: the time of the "
        "append. Not part of the Anthropic or OpenAI message shapes: it is an extra "
        "key of the message object in either, and every message an input message "
        "becomes (e.g. one per `tool_result` block) gets it.",
    )


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
    created_at: datetime = Field(
        description="When the message was written, in UTC: the "
        "`created_at` it was appended with, else the "
        "time of the append."
    )


class MessagesAppended(BaseModel):
    messages: list[MessagePublic]
    last_seq: int
    replayed: bool = Field(
        default=False,
        description="True when this is the stored first result of a "
        "request retried with the same Idempotency-Key.",
    )


class MessageList(BaseModel):
    items: list[MessagePublic]
    next_cursor: str | None

# Generated from loom_client/_async/sessions.py by scripts/generate_sync.py: do not edit.
"""Sessions, their messages and their built context."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from loom_client import _wire
from loom_client._sync.base import BaseClient
from loom_client._wire import RequestOptions, segment
from loom_client.models.context import ContextResponse
from loom_client.models.sessions import (
    Message,
    MessageIn,
    MessageList,
    MessagesAppended,
    RecallInput,
    RomInput,
    Session,
    SessionConfig,
    SessionList,
)
from loom_client.operations import operation
from loom_client.providers import ContextParams, context_params

MessageLike = MessageIn | Mapping[str, Any]


class SessionsMixin(BaseClient):
    @operation("POST", "/v1/sessions")
    def create_session(self, *, agent_id: str | None = None,
                       user_id: str | None = None,
                       config: SessionConfig | Mapping[str, Any] | None = None,
                       metadata: Mapping[str, Any] | None = None,
                       rom: RomInput | Mapping[str, Any] | None = None,
                       options: RequestOptions | None = None) -> Session:
        """Start a session (for `agent_id`, default: the calling agent; with `user_id`, the
        person it is with)."""
        return self._request(Session, "POST", "/v1/sessions", options=options,
                             json=_wire.body(agent_id=agent_id, user_id=user_id,
                                             config=config,
                                             metadata=metadata, rom=rom))

    @operation("GET", "/v1/sessions")
    def list_sessions(self, *, agent_id: str | None = None, limit: int | None = None,
                      cursor: str | None = None, user_id: str | None = None,
                      options: RequestOptions | None = None) -> SessionList:
        """One page of sessions, oldest first (agent keys see only their own; `user_id`:
        only the sessions with that user)."""
        return self._request(SessionList, "GET", "/v1/sessions", options=options,
                             params=_wire.query(agent_id=agent_id, limit=limit,
                                                cursor=cursor, user_id=user_id))

    @operation("GET", "/v1/sessions")
    def iter_sessions(self, *, agent_id: str | None = None,
                      page_size: int | None = None,
                      options: RequestOptions | None = None) -> Iterator[Session]:
        """Every session, following the cursors page by page."""
        cursor: str | None = None
        while True:
            page = self.list_sessions(agent_id=agent_id, limit=page_size, cursor=cursor,
                                      options=options)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("GET", "/v1/sessions/{session_id}")
    def get_session(self, session_id: str, *,
                    options: RequestOptions | None = None) -> Session:
        """A session with its tokens per layer."""
        return self._request(Session, "GET", f"/v1/sessions/{segment(session_id)}",
                             options=options)

    @operation("PATCH", "/v1/sessions/{session_id}")
    def update_session(self, session_id: str, *,
                       config: SessionConfig | Mapping[str, Any] | None = None,
                       metadata: Mapping[str, Any] | None = None,
                       options: RequestOptions | None = None) -> Session:
        """Change config fields (others keep their values) and/or replace the metadata."""
        return self._request(Session, "PATCH", f"/v1/sessions/{segment(session_id)}",
                             options=options,
                             json=_wire.body(config=config, metadata=metadata))

    @operation("DELETE", "/v1/sessions/{session_id}")
    def delete_session(self, session_id: str, *,
                       options: RequestOptions | None = None) -> None:
        """Delete a session and everything in it."""
        self._send("DELETE", f"/v1/sessions/{segment(session_id)}", options=options)

    @operation("POST", "/v1/sessions/{session_id}/messages")
    def append_messages(self, session_id: str, messages: Iterable[MessageLike], *,
                        idempotency_key: str | None = None,
                        options: RequestOptions | None = None) -> MessagesAppended:
        """Append messages (Anthropic or OpenAI shape) in one transaction.

        With `idempotency_key`, a retry of the same request returns the first result with
        `replayed=True` and appends nothing; the same key with another body raises Conflict.
        """
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._request(
      MessagesAppended, "POST", f"/v1/sessions/{segment(session_id)}/messages",
      options=options, headers=headers, json=_wire.body(messages=list(messages)))

    @operation("GET", "/v1/sessions/{session_id}/messages")
    def list_messages(self, session_id: str, *, after_seq: int | None = None,
                      offset: int | None = None, limit: int | None = None,
                      cursor: str | None = None,
                      options: RequestOptions | None = None) -> MessageList:
        """One page of the full history (the swap), oldest first."""
        return self._request(
      MessageList, "GET", f"/v1/sessions/{segment(session_id)}/messages",
      options=options, params=_wire.query(after_seq=after_seq, offset=offset,
                                          limit=limit, cursor=cursor))

    @operation("GET", "/v1/sessions/{session_id}/messages")
    def iter_messages(self, session_id: str, *, after_seq: int | None = None,
                      page_size: int | None = None,
                      options: RequestOptions | None = None) -> Iterator[Message]:
        """Every message after `after_seq` (default: all), following the cursors."""
        cursor: str | None = None
        while True:
            page = self.list_messages(session_id, after_seq=None if cursor else after_seq,
                                      limit=page_size, cursor=cursor, options=options)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("POST", "/v1/sessions/{session_id}/context")
    def build_context(self, session_id: str, *,
                      format: Literal["anthropic", "openai", "raw"] = "anthropic",
                      recall: RecallInput | Mapping[str, Any] | None = None,
                      record: bool | None = None, manifest: bool | None = None,
                      options: RequestOptions | None = None) -> ContextResponse:
        """The built context with its accounting (`raw`: every layer separately) and its
        `context_id`; `record` stores its manifest (default: the session's `audit`),
        `manifest` returns it."""
        return self._request(
      ContextResponse, "POST", f"/v1/sessions/{segment(session_id)}/context",
      options=options, json=_wire.body(format=format, recall=recall, record=record,
                                        manifest=manifest))

    @operation("POST", "/v1/sessions/{session_id}/context")
    def context(self, session_id: str,
                format: Literal["anthropic", "openai"] = "anthropic", *,
                recall: RecallInput | Mapping[str, Any] | None = None,
                record: bool | None = None,
                options: RequestOptions | None = None) -> ContextParams:
        """The context as keyword arguments of the provider SDK: `**ctx` into
        `anthropic.Anthropic().messages.create(model=..., max_tokens=..., **ctx)` or
        `openai.OpenAI().chat.completions.create(model=..., **ctx)`; `ctx.context_id` is
        the build's id, `ctx.response` holds the accounting (tokens per layer, usage,
        recall, compression)."""
        built = self.build_context(session_id, format=format, recall=recall,
                                   record=record, options=options)
        return context_params(built)

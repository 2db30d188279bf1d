"""Typed events of a shared-memory watch (Server-Sent Events) and the SSE line parser."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from loom_client.models._base import ResponseModel


class ReadyEvent(ResponseModel):
    """First event of every stream: the subscription is in place."""

    event: Literal["ready"] = "ready"
    at: datetime


class HeartbeatEvent(ResponseModel):
    event: Literal["heartbeat"] = "heartbeat"
    at: datetime


class _EntryEvent(ResponseModel):
    id: str | None = None
    """The SSE event id: the entry's version."""
    op: str
    namespace: str
    scope_id: str | None = None
    key: str
    version: int | None = None
    etag: str | None = None
    at: datetime | None = None
    initial: bool = False
    """True for the current entries sent first with `include_initial=True`."""


class PutEvent(_EntryEvent):
    event: Literal["put"] = "put"
    size_bytes: int | None = None
    content_type: str | None = None
    checksum: str | None = None
    writer_agent_id: str | None = None
    value: Any = None
    """Small JSON values come inline; otherwise read the entry."""


class DeleteEvent(_EntryEvent):
    event: Literal["delete"] = "delete"
    reason: str | None = None
    """`expired` when a TTL ran out."""


class DroppedEvent(ResponseModel):
    """Final event: the watcher fell behind and its backlog was discarded; re-read and
    watch again."""

    event: Literal["dropped"] = "dropped"
    reason: str | None = None
    missed: int = 0


class ClosedEvent(ResponseModel):
    """Final event: the server closed the stream (e.g. shutting down)."""

    event: Literal["closed"] = "closed"
    reason: str | None = None
    missed: int = 0


class UnknownEvent(ResponseModel):
    """An event this client version does not know (from a newer server)."""

    event: str
    id: str | None = None
    data: Any = None


WatchEvent = (ReadyEvent | HeartbeatEvent | PutEvent | DeleteEvent | DroppedEvent
              | ClosedEvent | UnknownEvent)

_KnownEvent = ReadyEvent | HeartbeatEvent | PutEvent | DeleteEvent | DroppedEvent | ClosedEvent
_EVENTS: dict[str, type[_KnownEvent]] = {
    "ready": ReadyEvent, "heartbeat": HeartbeatEvent, "put": PutEvent, "delete": DeleteEvent,
    "dropped": DroppedEvent, "closed": ClosedEvent,
}
FINAL_EVENTS = frozenset({"dropped", "closed"})


class SSEParser:
    """Turns the lines of a `text/event-stream` into typed events (one per blank line)."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> WatchEvent | None:
        """Take one line (without its end of line); return an event when one is complete."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value or None
        return None

    def _dispatch(self) -> WatchEvent | None:
        name, data, event_id = self._event or "message", self._data, self._id
        self._event, self._data, self._id = "", [], None
        if not data:
            return None
        raw = "\n".join(data)
        try:
            payload: Any = json.loads(raw)
        except ValueError:
            payload = raw
        cls = _EVENTS.get(name)
        if cls is None or not isinstance(payload, dict):
            return UnknownEvent(event=name, id=event_id, data=payload)
        if event_id is not None and issubclass(cls, _EntryEvent):
            payload = {**payload, "id": event_id}
        return cls.model_validate(payload)

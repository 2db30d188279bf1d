"""Watch streams: per-watcher bounded queues and Server-Sent Events framing (no I/O).

A writer never waits for a watcher: `offer` is non-blocking; a watcher whose queue is full
is marked dropped, its backlog discarded, and its stream ends with a final `dropped` event.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from app.shared_memory.etag import format_etag

_CLOSE = object()


class Watcher:
    def __init__(self, storage_prefix: str, maxsize: int) -> None:
        self.storage_prefix = storage_prefix
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=max(1, maxsize))
        self.closed_reason: str | None = None
        self.missed = 0

    def offer(self, event: dict[str, Any]) -> None:
        if self.closed_reason is not None:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.missed += 1
            self.close("slow_consumer")

    def close(self, reason: str) -> None:
        """End the stream after whatever the client can still be told (the final event)."""
        if self.closed_reason is not None:
            return
        self.closed_reason = reason
        while not self.queue.empty():  # drop the backlog: the final event must get through
            self.queue.get_nowait()
            self.missed += 1
        self.queue.put_nowait(_CLOSE)


def sse(event: str, data: dict[str, Any], event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id else ""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


def public_event(
    event: dict[str, Any], public_key: str, scope_out: str | None, *, initial: bool = False
) -> tuple[str, dict[str, Any]]:
    """The SSE event name and payload a client sees for a pub/sub event."""
    data: dict[str, Any] = {
        "op": event["op"],
        "namespace": event["ns"],
        "scope_id": scope_out,
        "key": public_key,
        "version": event.get("v"),
        "etag": format_etag(event["v"]) if event.get("v") else None,
        "at": event.get("at"),
        "initial": initial,
    }
    if event["op"] == "put":
        data.update(
            size_bytes=event.get("sz"),
            content_type=event.get("ct"),
            checksum=event.get("cs"),
            writer_agent_id=event.get("w"),
        )
        if "val" in event:
            data["value"] = event["val"]
    elif event.get("reason"):
        data["reason"] = event["reason"]
    return event["op"], data


async def stream(
    watcher: Watcher,
    initial: list[bytes],
    render: Callable[[dict[str, Any]], bytes | None],
    heartbeat: float,
    is_disconnected: Callable[[], Any],
) -> AsyncIterator[bytes]:
    """Yield SSE frames: `ready`, initial puts, live events, heartbeats, a final event."""
    yield sse("ready", {"at": datetime.now(UTC).isoformat()})
    for frame in initial:
        yield frame
    while True:
        try:
            item = await asyncio.wait_for(watcher.queue.get(), heartbeat)
        except TimeoutError:
            if await is_disconnected():
                return
            yield sse("heartbeat", {"at": datetime.now(UTC).isoformat()})
            continue
        if item is _CLOSE:
            name = "dropped" if watcher.closed_reason == "slow_consumer" else "closed"
            yield sse(name, {"reason": watcher.closed_reason, "missed": watcher.missed})
            return
        rendered = render(item)
        if rendered is not None:
            yield rendered

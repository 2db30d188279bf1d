# Generated from loom_client/_async/watch.py by scripts/generate_sync.py: do not edit.
"""A shared-memory watch as an iterator of typed events."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType

import httpx

from loom_client import _wire
from loom_client.models.watch import FINAL_EVENTS, SSEParser, WatchEvent


class WatchStream:
    """Typed events of `GET /v1/shared-memory/{namespace}/watch`, in order: `ready`,
    the initial entries (`include_initial`), then `put` / `delete` as they happen,
    `heartbeat`s, and a final `dropped` or `closed` event when the server ends the stream.

    Use it as a context manager so the connection is closed when you stop reading:
    `with client.watch_shared_memory("global") as events: for event in events:`.
    The connection opens on entering (errors such as 404 raise there) or on the first read.
    """

    def __init__(self, http: httpx.Client, request: httpx.Request) -> None:
        self._http = http
        self._request = request
        self._response: httpx.Response | None = None
        self._lines: Iterator[str] | None = None
        self._parser = SSEParser()
        self._finished = False

    def open(self) -> None:
        """Connect (once); raise the typed error when the server refuses the watch."""
        if self._response is not None or self._finished:
            return
        with _wire.transport_errors(self._request):
            response = self._http.send(self._request, stream=True)
        if response.status_code >= 400:
            try:
                response.read()
            finally:
                response.close()
            _wire.check(response)
        self._response = response
        self._lines = response.iter_lines()

    def close(self) -> None:
        self._finished = True
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> WatchStream:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> WatchStream:
        return self

    def __next__(self) -> WatchEvent:
        self.open()
        if self._finished or self._lines is None:
            raise StopIteration
        with _wire.transport_errors(self._request):  # the stream breaking off
            for line in self._lines:
                event = self._parser.feed(line)
                if event is not None:
                    if event.event in FINAL_EVENTS:
                        self.close()
                    return event
        self.close()
        raise StopIteration

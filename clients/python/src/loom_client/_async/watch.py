"""A shared-memory watch as an async iterator of typed events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType

import httpx

from loom_client import _wire
from loom_client.models.watch import FINAL_EVENTS, SSEParser, WatchEvent


class AsyncWatchStream:
    """Typed events of `GET /v1/shared-memory/{namespace}/watch`, in order: `ready`,
    the initial entries (`include_initial`), then `put` / `delete` as they happen,
    `heartbeat`s, and a final `dropped` or `closed` event when the server ends the stream.

    Use it as a context manager so the connection is closed when you stop reading:
    `async with client.watch_shared_memory("global") as events: async for event in events:`.
    The connection opens on entering (errors such as 404 raise there) or on the first read.
    """

    def __init__(self, http: httpx.AsyncClient, request: httpx.Request) -> None:
        self._http = http
        self._request = request
        self._response: httpx.Response | None = None
        self._lines: AsyncIterator[str] | None = None
        self._parser = SSEParser()
        self._finished = False

    async def open(self) -> None:
        """Connect (once); raise the typed error when the server refuses the watch."""
        if self._response is not None or self._finished:
            return
        with _wire.transport_errors(self._request):
            response = await self._http.send(self._request, stream=True)
        if response.status_code >= 400:
            try:
                await response.aread()
            finally:
                await response.aclose()
            _wire.check(response)
        self._response = response
        self._lines = response.aiter_lines()

    async def aclose(self) -> None:
        self._finished = True
        if self._response is not None:
            await self._response.aclose()

    async def __aenter__(self) -> AsyncWatchStream:
        await self.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncWatchStream:
        return self

    async def __anext__(self) -> WatchEvent:
        await self.open()
        if self._finished or self._lines is None:
            raise StopAsyncIteration
        with _wire.transport_errors(self._request):  # the stream breaking off
            async for line in self._lines:
                event = self._parser.feed(line)
                if event is not None:
                    if event.event in FINAL_EVENTS:
                        await self.aclose()
                    return event
        await self.aclose()
        raise StopAsyncIteration

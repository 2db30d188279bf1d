# Generated from loom_client/_async/contexts.py by scripts/generate_sync.py: do not edit.
"""What the model saw: a session's recorded context builds, replay and diff."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from loom_client import _wire
from loom_client._sync.base import BaseClient
from loom_client._wire import RequestOptions, segment
from loom_client.models.context import (
    ContextDiff,
    ContextList,
    ContextManifest,
    ContextReplay,
    ContextSummary,
)
from loom_client.operations import operation


def _contexts(session_id: str, rest: str = "") -> str:
    return f"/v1/sessions/{segment(session_id)}/contexts{rest}"


class ContextsMixin(BaseClient):
    @operation("GET", "/v1/sessions/{session_id}/contexts")
    def list_contexts(self, session_id: str, *, limit: int | None = None,
                      cursor: str | None = None,
                      options: RequestOptions | None = None) -> ContextList:
        """One page of the session's recorded builds, newest first."""
        return self._request(ContextList, "GET", _contexts(session_id), options=options,
                             params=_wire.query(limit=limit, cursor=cursor))

    @operation("GET", "/v1/sessions/{session_id}/contexts")
    def iter_contexts(self, session_id: str, *, page_size: int | None = None,
                      options: RequestOptions | None = None
                      ) -> Iterator[ContextSummary]:
        """Every recorded build, newest first, following the cursors."""
        cursor: str | None = None
        while True:
            page = self.list_contexts(session_id, limit=page_size, cursor=cursor,
                                      options=options)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("GET", "/v1/sessions/{session_id}/contexts/{context_id}")
    def get_context_manifest(self, session_id: str, context_id: str, *,
                             options: RequestOptions | None = None) -> ContextManifest:
        """What the model saw in a recorded build: its blocks, sources and why."""
        return self._request(ContextManifest, "GET",
                             _contexts(session_id, f"/{segment(context_id)}"),
                             options=options)

    @operation("POST", "/v1/sessions/{session_id}/contexts/{context_id}/replay")
    def replay_context(self, session_id: str, context_id: str, *,
                       format: Literal["anthropic", "openai", "raw"] | None = None,
                       options: RequestOptions | None = None) -> ContextReplay:
        """The recorded build rendered again from its sources (the same SHA-256); a source
        changed or erased since raises `Conflict` naming it."""
        return self._request(ContextReplay, "POST",
                             _contexts(session_id, f"/{segment(context_id)}/replay"),
                             options=options, params=_wire.query(format=format))

    @operation("GET", "/v1/sessions/{session_id}/contexts/{context_id}/diff/{other_id}")
    def diff_contexts(self, session_id: str, context_id: str, other_id: str, *,
                      options: RequestOptions | None = None) -> ContextDiff:
        """Blocks added, removed and changed from build `context_id` to `other_id`."""
        path = f"/{segment(context_id)}/diff/{segment(other_id)}"
        return self._request(ContextDiff, "GET", _contexts(session_id, path),
                             options=options)

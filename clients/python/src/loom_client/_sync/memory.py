# Generated from loom_client/_async/memory.py by scripts/generate_sync.py: do not edit.
"""A session's memory layers and Kernel, swap search, and the built-in tools."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Literal

from loom_client import _wire
from loom_client._sync.base import BaseClient
from loom_client._wire import RequestOptions, segment
from loom_client.models.memory import (
    Cleared,
    CompressResult,
    JobList,
    JobListed,
    Kernel,
    KernelSchema,
    Memory,
    PromoteResult,
    Snapshot,
    SnapshotList,
    ToolDefinition,
)
from loom_client.models.search import SearchResult
from loom_client.models.tools import ToolList, ToolResult
from loom_client.operations import operation
from loom_client.providers import tool_calls_in, tool_result_for, tool_use_of

Ranking = Literal["conversation", "message"]


def _session(session_id: str, rest: str = "") -> str:
    return f"/v1/sessions/{segment(session_id)}{rest}"


class MemoryMixin(BaseClient):
    @operation("GET", "/v1/sessions/{session_id}/memory")
    def get_memory(self, session_id: str, *,
                   options: RequestOptions | None = None) -> Memory:
        """The layers: L1 seqs, L2 summaries, promoted seqs, tokens and usage."""
        return self._request(Memory, "GET", _session(session_id, "/memory"),
                             options=options)

    @operation("GET", "/v1/jobs")
    def list_jobs(self, *, kind: Literal["compression", "facts"] | None = None,
                  status: str | None = None, agent_id: str | None = None,
                  limit: int | None = None, cursor: str | None = None,
                  options: RequestOptions | None = None) -> JobList:
        """One page of the tenant's background jobs, most recently changed first, with the
        queue's depth and worker liveness (service and admin keys)."""
        return self._request(JobList, "GET", "/v1/jobs", options=options,
                             params=_wire.query(kind=kind, status=status,
                                                agent_id=agent_id, limit=limit,
                                                cursor=cursor))

    @operation("GET", "/v1/jobs")
    def iter_jobs(self, *, kind: Literal["compression", "facts"] | None = None,
                  status: str | None = None, agent_id: str | None = None,
                  page_size: int | None = None,
                  options: RequestOptions | None = None) -> Iterator[JobListed]:
        """Every job, following the cursors."""
        cursor: str | None = None
        while True:
            page = self.list_jobs(kind=kind, status=status, agent_id=agent_id,
                                  limit=page_size, cursor=cursor, options=options)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("POST", "/v1/sessions/{session_id}/memory/compress")
    def compress(self, session_id: str, *, wait: bool = False,
                 options: RequestOptions | None = None) -> CompressResult:
        """Queue a compression (`enqueued=True`), or with `wait=True` compress now and
        return the memory afterwards."""
        return self._request(CompressResult, "POST",
                             _session(session_id, "/memory/compress"), options=options,
                             params=_wire.query(wait=wait or None))

    @operation("POST", "/v1/sessions/{session_id}/memory/promote")
    def promote(self, session_id: str, *, seqs: Iterable[int] | None = None,
                start_seq: int | None = None, end_seq: int | None = None,
                options: RequestOptions | None = None) -> PromoteResult:
        """Copy older messages back into the context (by `seqs` and/or an inclusive
        `start_seq`..`end_seq`); raises Conflict over budget."""
        return self._request(
      PromoteResult, "POST", _session(session_id, "/memory/promote"), options=options,
      json=_wire.body(seqs=list(seqs) if seqs is not None else None,
                      start_seq=start_seq, end_seq=end_seq))

    @operation("DELETE", "/v1/sessions/{session_id}/memory/promoted")
    def clear_promoted(self, session_id: str, *,
                       options: RequestOptions | None = None) -> Cleared:
        """Remove every promoted message from the context."""
        return self._request(Cleared, "DELETE", _session(session_id, "/memory/promoted"),
                             options=options)

    @operation("GET", "/v1/sessions/{session_id}/memory/snapshots")
    def list_snapshots(self, session_id: str, *, limit: int | None = None,
                       cursor: str | None = None,
                       options: RequestOptions | None = None) -> SnapshotList:
        """One page of the L2 snapshots archived in swap, newest first."""
        return self._request(SnapshotList, "GET",
                             _session(session_id, "/memory/snapshots"), options=options,
                             params=_wire.query(limit=limit, cursor=cursor))

    @operation("GET", "/v1/sessions/{session_id}/memory/snapshots")
    def iter_snapshots(self, session_id: str, *, page_size: int | None = None,
                       options: RequestOptions | None = None
                       ) -> Iterator[Snapshot]:
        """Every L2 snapshot, newest first, following the cursors."""
        cursor: str | None = None
        while True:
            page = self.list_snapshots(session_id, limit=page_size, cursor=cursor,
                                       options=options)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("GET", "/v1/sessions/{session_id}/kernel")
    def get_kernel(self, session_id: str, *,
                   options: RequestOptions | None = None) -> Kernel:
        """Tools, cached schemas (most recent first) and the latest large result reference."""
        return self._request(Kernel, "GET", _session(session_id, "/kernel"),
                             options=options)

    @operation("PUT", "/v1/sessions/{session_id}/kernel/tools")
    def put_kernel_tools(self, session_id: str,
                         tools: Iterable[ToolDefinition | Mapping[str, Any]], *,
                         options: RequestOptions | None = None) -> Kernel:
        """Replace the session's tool definitions (Anthropic shape)."""
        return self._request(Kernel, "PUT", _session(session_id, "/kernel/tools"),
                             options=options, json=_wire.body(tools=list(tools)))

    @operation("PUT", "/v1/sessions/{session_id}/kernel/schemas/{name}")
    def put_kernel_schema(self, session_id: str, name: str, schema: Any, *,
                          options: RequestOptions | None = None) -> KernelSchema:
        """Cache a schema (an LRU of 10: `evicted` names what fell out)."""
        return self._request(
      KernelSchema, "PUT", _session(session_id, f"/kernel/schemas/{segment(name)}"),
      options=options, json={"schema": _wire.dump(schema)})

    @operation("GET", "/v1/sessions/{session_id}/kernel/schemas/{name}")
    def get_kernel_schema(self, session_id: str, name: str, *,
                          options: RequestOptions | None = None) -> KernelSchema:
        """Read a cached schema (which makes it the most recently used)."""
        return self._request(
      KernelSchema, "GET", _session(session_id, f"/kernel/schemas/{segment(name)}"),
      options=options)

    @operation("POST", "/v1/sessions/{session_id}/search")
    def search_session(self, session_id: str, query: str, *, limit: int | None = None,
                       ranking: Ranking | None = None, rerank: bool | None = None,
                       promote: bool | None = None, after: datetime | str | None = None,
                       before: datetime | str | None = None,
                       options: RequestOptions | None = None) -> SearchResult:
        """Search this session's swap (`promote=True` puts the hits back in the context)."""
        return self._request(
      SearchResult, "POST", _session(session_id, "/search"), options=options,
      json=_wire.body(query=query, limit=limit, ranking=ranking, rerank=rerank,
                      promote=promote, after=after, before=before))

    @operation("POST", "/v1/search")
    def search(self, query: str, *,
               scope: Literal["agent", "user", "tenant"] | None = None,
               agent_id: str | None = None, user_id: str | None = None,
               limit: int | None = None,
               ranking: Ranking | None = None, rerank: bool | None = None,
               after: datetime | str | None = None, before: datetime | str | None = None,
               options: RequestOptions | None = None) -> SearchResult:
        """Search the sessions of an agent (`scope="agent"`, default), of a user
        (`scope="user"` with `user_id`) or of the whole tenant."""
        return self._request(
      SearchResult, "POST", "/v1/search", options=options,
      json=_wire.body(query=query, scope=scope, agent_id=agent_id, user_id=user_id,
                      limit=limit,
                      ranking=ranking, rerank=rerank, after=after, before=before))

    @operation("GET", "/v1/sessions/{session_id}/tools")
    def list_tools(self, session_id: str, *,
                   format: Literal["anthropic", "openai"] = "anthropic",
                   options: RequestOptions | None = None) -> ToolList:
        """The built-in tools (recall/search the conversation, shared memory) as Anthropic
        tool definitions or OpenAI function tools; `.params()` gives SDK-ready dicts."""
        return self._request(ToolList, "GET", _session(session_id, "/tools"),
                             options=options, params={"format": format})

    @operation("POST", "/v1/sessions/{session_id}/tool-calls")
    def call_tool(self, session_id: str, name: str, input: Any = None, *,
                  tool_use_id: str | None = None,
                  options: RequestOptions | None = None) -> ToolResult:
        """Execute a built-in tool; tool failures come back as `is_error=True` results."""
        block = {"type": "tool_use", "id": tool_use_id or f"toolu_{uuid.uuid4().hex}",
                 "name": name, "input": _wire.dump(input if input is not None else {})}
        return self._request(ToolResult, "POST", _session(session_id, "/tool-calls"),
                             options=options, json=block)

    @operation("POST", "/v1/sessions/{session_id}/tool-calls")
    def execute_tool_call(self, session_id: str, call: Any, *,
                          options: RequestOptions | None = None) -> dict[str, Any]:
        """Execute a model's tool call and return its result in the same shape: an
        Anthropic `tool_use` block gives a `tool_result` block, an OpenAI `tool_calls`
        entry gives a `{"role": "tool", ...}` message. SDK objects or dicts."""
        shape, block = tool_use_of(call)
        result = self.call_tool(session_id, block["name"], block["input"],
                                tool_use_id=block["id"], options=options)
        return tool_result_for(shape, result)

    @operation("POST", "/v1/sessions/{session_id}/tool-calls")
    def execute_tool_calls(self, session_id: str, items: Iterable[Any] | None, *,
                           options: RequestOptions | None = None
                           ) -> list[dict[str, Any]]:
        """Execute every tool call among `items` in order (an Anthropic response's
        `content`, or an OpenAI message's `tool_calls`) and return their results: the
        content of the next user message (Anthropic), or the `tool` messages (OpenAI)."""
        return [self.execute_tool_call(session_id, call, options=options)
                for call in tool_calls_in(items)]

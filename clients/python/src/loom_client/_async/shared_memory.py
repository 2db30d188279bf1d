"""Shared memory: entries (JSON or raw bytes) with compare-and-set, key listings, stats,
the watch stream, and data references."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from loom_client import _wire
from loom_client._async.base import AsyncBaseClient
from loom_client._async.watch import AsyncWatchStream
from loom_client._wire import RequestOptions, key_path, segment
from loom_client.models.shared_memory import (
    DataReference,
    SharedMemoryBlob,
    SharedMemoryEntry,
    SharedMemoryKey,
    SharedMemoryKeyList,
    SharedMemoryStats,
)
from loom_client.operations import operation

ENTRY = "/v1/shared-memory/{namespace}/{key}"


def _entry(namespace: str, key: str) -> str:
    return f"/v1/shared-memory/{segment(namespace)}/{key_path(key)}"


class AsyncSharedMemoryMixin(AsyncBaseClient):
    @operation("PUT", ENTRY)
    async def put_shared_memory(self, namespace: str, key: str, value: Any, *,
                                scope_id: str | None = None,
                                metadata: Mapping[str, Any] | None = None,
                                ttl_seconds: int | None = None,
                                if_match: int | str | None = None,
                                if_none_match: int | str | None = None,
                                options: RequestOptions | None = None) -> SharedMemoryEntry:
        """Create or replace a JSON entry (`created` tells which).

        `if_match` (a version or an ETag) makes it a compare-and-set: a stale version raises
        Conflict (`version_conflict`), a missing entry PreconditionFailed;
        `if_none_match="*"` creates only (PreconditionFailed when the key exists).
        """
        payload: dict[str, Any] = {"value": _wire.dump(value)}
        if metadata is not None:
            payload["metadata"] = _wire.dump(metadata)
        if ttl_seconds is not None:
            payload["ttl_seconds"] = ttl_seconds
        return await self._request(
            SharedMemoryEntry, "PUT", _entry(namespace, key), options=options, json=payload,
            params=_wire.query(scope_id=scope_id),
            headers=_wire.preconditions(if_match, if_none_match))

    @operation("PUT", ENTRY)
    async def put_shared_memory_bytes(self, namespace: str, key: str, data: bytes | str, *,
                                      content_type: str | None = None,
                                      scope_id: str | None = None,
                                      metadata: Mapping[str, Any] | None = None,
                                      ttl_seconds: int | None = None,
                                      if_match: int | str | None = None,
                                      if_none_match: int | str | None = None,
                                      options: RequestOptions | None = None
                                      ) -> SharedMemoryEntry:
        """Create or replace a raw entry: the bytes under `content_type` (default
        `application/octet-stream`, `text/plain; charset=utf-8` for text), read back as a
        `SharedMemoryBlob`. Preconditions as in `put_shared_memory`."""
        if isinstance(data, str):
            data, default_type = data.encode(), "text/plain; charset=utf-8"
        else:
            default_type = "application/octet-stream"
        headers = {"Content-Type": content_type or default_type,
                   **_wire.preconditions(if_match, if_none_match)}
        if metadata is not None:
            headers["X-Loom-Metadata"] = json.dumps(_wire.dump(metadata))
        return await self._request(
            SharedMemoryEntry, "PUT", _entry(namespace, key), options=options, content=data,
            params=_wire.query(scope_id=scope_id, ttl_seconds=ttl_seconds), headers=headers)

    @operation("GET", ENTRY)
    async def get_shared_memory(self, namespace: str, key: str, *,
                                scope_id: str | None = None,
                                options: RequestOptions | None = None
                                ) -> SharedMemoryEntry | SharedMemoryBlob:
        """A JSON entry with its `value`, or a raw entry's bytes (raises NotFound)."""
        response = await self._send("GET", _entry(namespace, key), options=options,
                                    params=_wire.query(scope_id=scope_id))
        return _wire.entry_or_blob(response)

    @operation("GET", ENTRY)
    async def get_shared_memory_if_changed(self, namespace: str, key: str,
                                           etag: int | str, *, scope_id: str | None = None,
                                           options: RequestOptions | None = None
                                           ) -> SharedMemoryEntry | SharedMemoryBlob | None:
        """Like `get_shared_memory`, but None while the entry is still at `etag` (a
        version or an ETag): a conditional GET answered 304."""
        response = await self._send("GET", _entry(namespace, key), options=options,
                                    params=_wire.query(scope_id=scope_id),
                                    headers=_wire.preconditions(None, etag))
        if response.status_code == 304:
            return None
        return _wire.entry_or_blob(response)

    @operation("GET", ENTRY)
    async def get_shared_memory_ref(self, namespace: str, key: str, *,
                                    scope_id: str | None = None,
                                    options: RequestOptions | None = None) -> DataReference:
        """The entry's data reference (`ref=true`) instead of its value."""
        return await self._request(DataReference, "GET", _entry(namespace, key),
                                   options=options,
                                   params=_wire.query(scope_id=scope_id, ref=True))

    @operation("DELETE", ENTRY)
    async def delete_shared_memory(self, namespace: str, key: str, *,
                                   scope_id: str | None = None,
                                   if_match: int | str | None = None,
                                   options: RequestOptions | None = None) -> None:
        """Delete an entry (with `if_match`: only at that version, else Conflict)."""
        await self._send("DELETE", _entry(namespace, key), options=options,
                         params=_wire.query(scope_id=scope_id),
                         headers=_wire.preconditions(if_match))

    @operation("GET", "/v1/shared-memory/{namespace}")
    async def list_shared_memory_keys(self, namespace: str, *, scope_id: str | None = None,
                                      prefix: str | None = None, limit: int | None = None,
                                      cursor: str | None = None,
                                      options: RequestOptions | None = None
                                      ) -> SharedMemoryKeyList:
        """One page of keys in key order."""
        return await self._request(
            SharedMemoryKeyList, "GET", f"/v1/shared-memory/{segment(namespace)}",
            options=options, params=_wire.query(scope_id=scope_id, prefix=prefix, limit=limit,
                                                cursor=cursor))

    @operation("GET", "/v1/shared-memory/{namespace}")
    async def iter_shared_memory_keys(self, namespace: str, *, scope_id: str | None = None,
                                      prefix: str | None = None,
                                      page_size: int | None = None,
                                      options: RequestOptions | None = None
                                      ) -> AsyncIterator[SharedMemoryKey]:
        """Every key (under `prefix`), following the cursors."""
        cursor: str | None = None
        while True:
            page = await self.list_shared_memory_keys(namespace, scope_id=scope_id,
                                                      prefix=prefix, limit=page_size,
                                                      cursor=cursor, options=options)
            for item in page.items:
                yield item
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("GET", "/v1/shared-memory/stats")
    async def shared_memory_stats(self, *,
                                  options: RequestOptions | None = None) -> SharedMemoryStats:
        """Per namespace: live keys and bytes you can see, reads, writes, tier hits."""
        return await self._request(SharedMemoryStats, "GET", "/v1/shared-memory/stats",
                                   options=options)

    @operation("GET", "/v1/shared-memory/{namespace}/watch")
    def watch_shared_memory(self, namespace: str, *, scope_id: str | None = None,
                            prefix: str | None = None, include_initial: bool = False,
                            heartbeat_seconds: float | None = None,
                            options: RequestOptions | None = None) -> AsyncWatchStream:
        """Stream puts and deletes under `prefix` as typed events (see AsyncWatchStream)."""
        request = self._build(
            "GET", f"/v1/shared-memory/{segment(namespace)}/watch", options=options,
            stream=True, headers={"Accept": "text/event-stream"},
            params=_wire.query(scope_id=scope_id, prefix=prefix,
                               include_initial=include_initial or None,
                               heartbeat_seconds=heartbeat_seconds))
        return AsyncWatchStream(self._http, request)

    @operation("GET", "/v1/refs/{ref_id}")
    async def get_ref(self, ref_id: str, *,
                      options: RequestOptions | None = None) -> SharedMemoryBlob:
        """The full data behind a `ref_...` id, with its content type."""
        return _wire.blob(await self._send("GET", f"/v1/refs/{segment(ref_id)}",
                                           options=options))

    @operation("GET", "/v1/refs/{ref_id}")
    async def get_ref_meta(self, ref_id: str, *,
                           options: RequestOptions | None = None) -> DataReference:
        """The data reference itself (`meta=true`): size, checksum, content type."""
        return await self._request(DataReference, "GET", f"/v1/refs/{segment(ref_id)}",
                                   options=options, params=_wire.query(meta=True))

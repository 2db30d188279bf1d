"""Shared memory: entries, key listings, stats, data references and raw values."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from loom_client.models._base import Page, ResponseModel

Namespace = Literal["global", "workflow", "swarm", "debate", "session", "agent"]
"""`workflow`/`swarm`/`debate`/`session` need a `scope_id`; `agent` is the caller's own."""


class SharedMemoryEntry(ResponseModel):
    """An entry's description; GET of a JSON entry adds its `value`."""

    namespace: str
    scope_id: str | None
    key: str
    version: int
    etag: str
    content_type: str
    size_bytes: int
    stored_bytes: int
    compressed: bool
    checksum: str
    ref_id: str
    metadata: dict[str, Any]
    writer_agent_id: str | None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    created: bool | None = None
    """PUT only: True when the entry was created (201), False when replaced (200)."""
    value: Any = None


class SharedMemoryBlob(ResponseModel):
    """A raw (non-JSON) value: its bytes, content type, and the entry headers."""

    content: bytes
    content_type: str
    etag: str | None = None
    version: int | None = None
    checksum: str | None = None
    """`sha256=<hex>` of the bytes."""
    ref_id: str | None = None
    compressed: bool | None = None
    location: str | None = None


class SharedMemoryKey(ResponseModel):
    key: str
    version: int
    size_bytes: int
    content_type: str
    expires_at: datetime | None
    updated_at: datetime


class SharedMemoryKeyList(Page):
    namespace: str
    scope_id: str | None
    items: list[SharedMemoryKey]


class NamespaceStats(ResponseModel):
    namespace: str
    keys: int
    bytes: int
    stored_bytes: int
    reads: int
    writes: int
    hits: int
    misses: int


class SharedMemoryStats(ResponseModel):
    namespaces: list[NamespaceStats]
    memory_tier: dict[str, int]


class DataReference(ResponseModel):
    """The stand-in for a large payload; fetch the data with `get_ref(id)`."""

    id: str
    size_bytes: int
    checksum: str
    content_type: str
    location: str = "postgres"
    compressed: bool
    stored_at: datetime
    metadata: dict[str, Any] = {}

"""API schemas for shared memory."""

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.core.strict import JSON_INT
from app.shared_memory.keys import Namespace
from app.shared_memory.ttl import MAX_TTL_SECONDS, MIN_TTL_SECONDS


class SharedMemoryPut(BaseModel):
    """JSON body of a PUT with `Content-Type: application/json`.

    Any other content type stores the raw body bytes under that type instead (metadata then
    comes from the `X-Loom-Metadata` header as a JSON object, TTL from `ttl_seconds`).
    """

    model_config = ConfigDict(extra="forbid")

    value: Any = Field(description="any JSON value (stored as compact UTF-8 JSON)")
    metadata: dict[str, Any] = Field(default_factory=dict)
    ttl_seconds: Annotated[int, Field(ge=MIN_TTL_SECONDS, le=MAX_TTL_SECONDS), JSON_INT] | None = (
        None
    )


# what a shared-memory version is (app/shared_memory/etag.py): not a per-key count
VERSION_DESCRIPTION = (
    "The entry's version, for compare-and-set. Drawn from one counter shared by every "
    "shared-memory write of the deployment (all keys, namespaces and tenants), not counted "
    "per key: it grows with each write of this entry and never repeats, even across a "
    "delete and re-create, but a new key may start at any number and consecutive writes "
    "of one key may skip numbers (1 -> 8 -> 15)."
)


class SharedMemoryEntryPublic(BaseModel):
    """An entry's description (PUT response; GET adds `value` for JSON entries)."""

    namespace: Namespace
    scope_id: str | None = Field(description="null for global; the agent id for agent")
    key: str
    version: int = Field(description=VERSION_DESCRIPTION)
    etag: str = Field(description='The version in quotes (`"42"`): for If-Match / If-None-Match.')
    content_type: str
    size_bytes: int = Field(description="original size in bytes")
    stored_bytes: int = Field(description="bytes in the durable store (after gzip)")
    compressed: bool
    checksum: str = Field(description="SHA-256 hex of the original bytes")
    ref_id: str
    metadata: dict[str, Any]
    writer_agent_id: str | None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    created: bool | None = Field(default=None, description="PUT only: a new entry was made")
    value: Any = Field(default=None, description="GET of a JSON entry: the value")


class SharedMemoryKey(BaseModel):
    key: str
    version: int = Field(description=VERSION_DESCRIPTION)
    size_bytes: int
    content_type: str
    expires_at: datetime | None
    updated_at: datetime


class SharedMemoryKeyList(BaseModel):
    namespace: Namespace
    scope_id: str | None
    items: list[SharedMemoryKey]
    next_cursor: str | None


class SharedMemoryNamespaceStats(BaseModel):
    namespace: Namespace
    keys: int
    bytes: int = Field(description="original bytes of live entries")
    stored_bytes: int
    reads: int
    writes: int
    hits: int = Field(description="reads served by a memory tier")
    misses: int


class SharedMemoryStats(BaseModel):
    namespaces: list[SharedMemoryNamespaceStats]
    memory_tier: dict[str, int] = Field(
        description="this API process's memory tier: bytes, items, max_bytes, evictions"
    )

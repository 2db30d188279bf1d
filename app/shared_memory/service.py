"""Shared-memory logic: scoping, preconditions, codec, memory tier, events.

Reads: memory tier (this process) -> PostgreSQL; every read verifies the SHA-256 of the
bytes it returns. Writes go to PostgreSQL; after the commit the writing process updates its
tier and publishes the event that invalidates the other processes' tiers and feeds watchers.
"""

import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import asyncpg

from app.auth.caller import Caller
from app.models.shared_memory_entry import EntryRow
from app.sessions import access
from app.shared_memory import codec, etag, keys, repository
from app.shared_memory.errors import (
    EntryNotFound,
    EntryPreconditionFailed,
    IntegrityError,
    InvalidScope,
    RefNotFound,
    ValueTooLarge,
    VersionConflict,
)
from app.shared_memory.keys import Address, Namespace
from app.shared_memory.metrics import INTEGRITY_ERRORS
from app.shared_memory.refs import DataReference, Location, new_ref_id
from app.shared_memory.runtime import SharedMemoryRuntime
from app.shared_memory.ttl import expires_at as ttl_expiry
from app.shared_memory.ttl import is_expired

EVENT_VALUE_MAX = 16 * 1024  # JSON values up to this size ride along in watch events


@dataclass(slots=True)
class Loaded:
    """An entry with its original bytes (verified)."""

    namespace: str
    scope_id: str
    storage_key: str
    version: int
    content_type: str
    size_bytes: int
    stored_bytes: int
    compressed: bool
    sha256: str
    ref_id: str
    metadata: dict[str, Any]
    writer_agent_id: str | None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    data: bytes = b""
    location: Location = "postgres"

    @property
    def is_json(self) -> bool:
        return self.content_type.split(";")[0].strip() == "application/json"

    def head(self, key: str, created: bool | None = None) -> dict[str, Any]:
        """The public description (SharedMemoryEntryPublic fields, without value)."""
        return {
            "namespace": self.namespace,
            "key": key,
            "version": self.version,
            "scope_id": self.scope_id or None,
            "etag": etag.format_etag(self.version),
            "content_type": self.content_type,
            "size_bytes": self.size_bytes,
            "stored_bytes": self.stored_bytes,
            "compressed": self.compressed,
            "checksum": self.sha256,
            "ref_id": self.ref_id,
            "metadata": self.metadata,
            "writer_agent_id": self.writer_agent_id,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "created": created,
        }

    def reference(self) -> DataReference:
        return DataReference(
            id=self.ref_id,
            size_bytes=self.size_bytes,
            checksum=self.sha256,
            content_type=self.content_type,
            location=self.location,
            compressed=self.compressed,
            stored_at=self.updated_at,
            metadata=self.metadata,
        )


def _from_row(row: EntryRow, data: bytes = b"") -> Loaded:
    return Loaded(
        row.namespace,
        row.scope_id,
        row.storage_key,
        row.version,
        row.content_type,
        row.size_bytes,
        row.stored_bytes,
        row.compressed,
        row.sha256,
        row.ref_id,
        row.meta or {},
        row.writer_agent_id,
        row.expires_at,
        row.created_at,
        row.updated_at,
        data,
    )


def _now() -> datetime:
    return datetime.now(UTC)


def _addr(caller: Caller, a: Address) -> repository.Addr:
    return repository.Addr(caller.tenant_id, a.namespace.value, a.scope_id, a.storage_key)


def _tier_key(ra: repository.Addr) -> tuple[str, str, str, str]:
    return (str(ra.tenant_id), ra.namespace, ra.scope_id, ra.storage_key)


async def resolve(
    conn: asyncpg.Connection,
    caller: Caller,
    namespace: Namespace,
    key: str | None,
    scope_id: str | None,
) -> Address:
    """Validate namespace/scope/key for this caller (session scopes must exist in-tenant)."""
    if key is None:
        scope = keys.resolve_scope(namespace, scope_id, caller.agent_id)
        a = Address(namespace, scope, "", "")
    else:
        a = keys.address(namespace, key, scope_id, caller.agent_id)
    if namespace is Namespace.SESSION:
        sid = access.parse_session_id(a.scope_id)
        if sid is None:
            raise InvalidScope("scope_id of the session namespace is a session id")
        await access.require_visible_pg(conn, caller, sid)
    return a


def _check(loaded: Loaded) -> Loaded:
    try:
        codec.verify(loaded.data, loaded.sha256)
    except IntegrityError:
        INTEGRITY_ERRORS.inc()
        raise
    return loaded


def _from_tier(rt: SharedMemoryRuntime, ra: repository.Addr, now: datetime) -> Loaded | None:
    """The live entry from the memory tier (verified bytes), or None: not cached, expired
    (PostgreSQL decides then: a holder may keep it) or the tier is off."""
    if not rt.cache_enabled:
        return None
    tk = _tier_key(ra)
    hit = rt.tier.get(tk)
    if hit is None:
        return None
    cached: Loaded = hit[0]
    if is_expired(cached.expires_at, now):
        rt.tier.invalidate(tk)
        return None
    rt.count(tk[0], ra.namespace, "hits")
    return _check(replace(cached, location="memory"))


async def load(
    conn: asyncpg.Connection, rt: SharedMemoryRuntime, ra: repository.Addr
) -> Loaded | None:
    """The live entry with verified bytes, from the memory tier when possible."""
    now = _now()
    hit = _from_tier(rt, ra, now)
    if hit is not None:
        return hit
    return await _load_stored(conn, rt, ra, now)


async def _load_stored(
    conn: asyncpg.Connection, rt: SharedMemoryRuntime, ra: repository.Addr, now: datetime
) -> Loaded | None:
    rt.count(str(ra.tenant_id), ra.namespace, "misses")
    found = await repository.get(conn, ra, now)
    if found is None:
        return None
    row, stored = found
    try:
        data = codec.decode(
            stored, compressed=row.compressed, sha256=row.sha256, size=row.size_bytes
        )
    except IntegrityError:
        INTEGRITY_ERRORS.inc()
        raise
    loaded = _from_row(row, data)
    if rt.cache_enabled and not is_expired(loaded.expires_at, now):
        rt.tier.put(_tier_key(ra), loaded, len(data), loaded.version)
    return loaded


async def read_at(
    conn: asyncpg.Connection, rt: SharedMemoryRuntime, caller: Caller, a: Address
) -> Loaded:
    """The entry at an address already resolved for this caller (`resolve`)."""
    ra = _addr(caller, a)
    rt.count(str(caller.tenant_id), ra.namespace, "reads")
    loaded = await load(conn, rt, ra)
    if loaded is None:
        raise _not_found(a)
    return loaded


def _not_found(a: Address) -> EntryNotFound:
    return EntryNotFound(f"No entry '{a.key}' in namespace '{a.namespace.value}'.")


async def read(
    connection: Callable[[], AbstractAsyncContextManager[asyncpg.Connection]],
    rt: SharedMemoryRuntime,
    caller: Caller,
    namespace: Namespace,
    key: str,
    scope_id: str | None,
) -> Loaded:
    """The entry at namespace/key for this caller. A memory-tier hit of a namespace whose
    address needs no lookup (all but `session`, whose scope must be a visible session)
    takes no connection: `connection()` is entered only when PostgreSQL is needed."""
    if namespace is Namespace.SESSION:
        async with connection() as conn:
            return await read_at(
                conn, rt, caller, await resolve(conn, caller, namespace, key, scope_id)
            )
    a = keys.address(namespace, key, scope_id, caller.agent_id)
    ra = _addr(caller, a)
    rt.count(str(caller.tenant_id), ra.namespace, "reads")
    now = _now()
    loaded = _from_tier(rt, ra, now)
    if loaded is None:
        async with connection() as conn:
            loaded = await _load_stored(conn, rt, ra, now)
    if loaded is None:
        raise _not_found(a)
    return loaded


def _referenced() -> VersionConflict:
    # Referenced data is immutable: a message's reference (and its checksum) must stay true.
    return VersionConflict(
        "The entry is held by a message's data reference; it cannot be "
        "changed or deleted while referenced.",
        code="entry_referenced",
    )


def _event(op: str, ra: repository.Addr, key: str, version: int, **extra: Any) -> dict[str, Any]:
    return {
        "op": op,
        "t": str(ra.tenant_id),
        "ns": ra.namespace,
        "sc": ra.scope_id,
        "sk": ra.storage_key,
        "k": key,
        "v": version,
        "at": _now().isoformat(),
        **extra,
    }


# What a write leaves to do once its transaction has committed (the event, the tier).
Publish = Callable[[], Awaitable[None]]


async def write(
    conn: asyncpg.Connection,
    rt: SharedMemoryRuntime,
    caller: Caller,
    a: Address,
    data: bytes,
    *,
    content_type: str,
    metadata: dict[str, Any],
    ttl_seconds: int | None,
    if_match: str | None = None,
    if_none_match: str | None = None,
    max_bytes: int,
    compress_threshold: int,
    require_if_match: bool = False,
) -> tuple[Loaded, bool, Publish]:
    """Store `data` at `a` (in the caller's transaction); returns the entry without data,
    whether it was created, and the publish to run once the transaction has committed."""
    if len(data) > max_bytes:
        raise ValueTooLarge(
            f"The value is over the {max_bytes}-byte limit.",
            details={"size_bytes": len(data), "max_bytes": max_bytes},
        )
    ra = _addr(caller, a)
    now = _now()
    current = await repository.current(conn, ra, now)
    cur_version = current[0] if current is not None else None
    etag.check_write(
        if_match=if_match,
        if_none_match=if_none_match,
        current_version=cur_version,
        require_if_match=require_if_match,
    )
    if current is not None and current[1]:  # held by a message
        raise _referenced()
    enc, fields = _fields(
        caller, data, content_type, metadata, ttl_seconds, compress_threshold, now
    )
    if if_match is not None:
        fields.pop("ref_id")  # an update keeps the entry's reference id
        row = await repository.update_if_version(conn, ra, cur_version or 0, fields, now)
        if row is None:  # a concurrent writer won the compare-and-set
            latest = await repository.current(conn, ra, _now())
            if latest is None:
                raise EntryPreconditionFailed("If-Match given but the entry does not exist")
            raise etag.stale(latest[0])
    else:
        row = await repository.upsert(conn, ra, fields, now, only_if_dead=if_none_match is not None)
        if row is None:
            raise EntryPreconditionFailed("entry already exists")
    created = cur_version is None
    loaded = _from_row(row)
    return loaded, created, _written(rt, caller, ra, a, loaded, data)


def _fields(
    caller: Caller,
    data: bytes,
    content_type: str,
    metadata: dict[str, Any],
    ttl_seconds: int | None,
    compress_threshold: int,
    now: datetime,
) -> tuple[codec.Encoded, dict[str, Any]]:
    """The stored form of `data` and the columns a write sets."""
    enc = codec.encode(data, threshold=compress_threshold)
    return enc, {
        "value": enc.stored,
        "content_type": content_type,
        "metadata": metadata,
        "sha256": enc.sha256,
        "compressed": enc.compressed,
        "size_bytes": enc.size,
        "stored_bytes": len(enc.stored),
        "writer_agent_id": caller.agent_id,
        "expires_at": ttl_expiry(now, ttl_seconds),
        "ref_id": new_ref_id(),
    }


def _written(
    rt: SharedMemoryRuntime,
    caller: Caller,
    ra: repository.Addr,
    a: Address,
    loaded: Loaded,
    data: bytes,
) -> Callable[[], Awaitable[None]]:
    """Count a write and drop the old value from the tier; the publish to run once the
    write has committed (the event, and the new value into the tier)."""
    rt.count(str(caller.tenant_id), ra.namespace, "writes")
    event = _event(
        "put",
        ra,
        a.key,
        loaded.version,
        sz=loaded.size_bytes,
        ct=loaded.content_type,
        cs=loaded.sha256,
        w=caller.agent_id,
    )
    if loaded.is_json and loaded.size_bytes <= EVENT_VALUE_MAX:
        event["val"] = json.loads(data)
    cached = replace(loaded, data=data)

    async def publish() -> None:
        if rt.cache_enabled and not is_expired(cached.expires_at, _now()):
            rt.tier.put(_tier_key(ra), cached, len(data), cached.version)
        await rt.publish(event)

    rt.tier.invalidate(_tier_key(ra))  # never serve the old value from here on
    return publish


async def create(
    conn: asyncpg.Connection,
    rt: SharedMemoryRuntime,
    caller: Caller,
    a: Address,
    data: bytes,
    *,
    content_type: str,
    metadata: dict[str, Any],
    ttl_seconds: int | None,
    max_bytes: int,
    compress_threshold: int,
) -> tuple[Loaded, Callable[[], Awaitable[None]]]:
    """`write` with `If-None-Match: *` of a new entry at a fresh address, on an asyncpg
    connection (a message append's transaction: `app.shared_memory.offload`): the entry
    without data, and the publish to run once the transaction has committed."""
    if len(data) > max_bytes:
        raise ValueTooLarge(
            f"The value is over the {max_bytes}-byte limit.",
            details={"size_bytes": len(data), "max_bytes": max_bytes},
        )
    ra = _addr(caller, a)
    _, fields = _fields(
        caller, data, content_type, metadata, ttl_seconds, compress_threshold, _now()
    )
    row = await repository.create(conn, ra, fields)
    if row is None:
        raise EntryPreconditionFailed("entry already exists")
    loaded = _from_row(row)
    return loaded, _written(rt, caller, ra, a, loaded, data)


async def delete(
    conn: asyncpg.Connection,
    rt: SharedMemoryRuntime,
    caller: Caller,
    a: Address,
    *,
    if_match: str | None,
    require_if_match: bool = False,
) -> tuple[int, Publish]:
    """Delete the entry (in the caller's transaction); referenced entries are refused (409
    `entry_referenced`). Returns the deleted version and the publish to run once the
    transaction has committed."""
    ra = _addr(caller, a)
    now = _now()
    current = await repository.current(conn, ra, now)
    if current is None:
        if if_match is not None:
            raise EntryPreconditionFailed("If-Match given but the entry does not exist")
        raise EntryNotFound(f"No entry '{a.key}' in namespace '{a.namespace.value}'.")
    version, held = current
    etag.check_write(
        if_match=if_match,
        if_none_match=None,
        current_version=version,
        require_if_match=require_if_match,
    )
    if held:
        raise _referenced()
    gone = await repository.delete(conn, ra, now, version if if_match else None)
    if gone is None:
        latest = await repository.current(conn, ra, _now())
        if latest is None:
            raise EntryNotFound(f"No entry '{a.key}' in namespace '{a.namespace.value}'.")
        raise etag.stale(latest[0])
    tombstone = await repository.next_version(conn)
    rt.tier.invalidate(_tier_key(ra), tombstone)
    rt.count(str(caller.tenant_id), ra.namespace, "writes")
    event = _event("delete", ra, a.key, tombstone, reason="deleted")

    async def publish() -> None:
        await rt.publish(event)

    return gone, publish


async def _may_see_scope(
    conn: asyncpg.Connection, caller: Caller, namespace: str, scope_id: str
) -> bool:
    """Whether an entry's scope is visible to `caller` (the rules `resolve` applies to
    addresses, applied to a stored entry): `agent` entries only to their own agent,
    `session` entries only to those who may see that session."""
    if namespace == Namespace.AGENT.value:
        return bool(caller.agent_id) and scope_id == caller.agent_id
    if namespace == Namespace.SESSION.value:
        sid = access.parse_session_id(scope_id)
        return sid is not None and await access.visible_agent_pg(conn, caller, sid) is not None
    return True


async def resolve_ref(
    conn: asyncpg.Connection, rt: SharedMemoryRuntime, caller: Caller, ref_id: str
) -> Loaded:
    """The entry behind a data reference, with the visibility of its namespace."""
    found = await repository.get_by_ref(conn, caller.tenant_id, ref_id, _now())
    if found is None or not await _may_see_scope(
        conn, caller, found[0].namespace, found[0].scope_id
    ):
        raise RefNotFound("No such data reference.")
    row, stored = found
    try:
        data = codec.decode(
            stored, compressed=row.compressed, sha256=row.sha256, size=row.size_bytes
        )
    except IntegrityError:
        INTEGRITY_ERRORS.inc()
        raise
    rt.count(str(caller.tenant_id), row.namespace, "reads")
    return _from_row(row, data)

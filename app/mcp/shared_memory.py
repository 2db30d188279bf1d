"""Shared-memory tools: get, put, list and delete in every namespace, as the caller (the
`agent` namespace is the caller's own agent's, as on REST; `session` scopes must be
sessions the caller may see). They call `app.shared_memory.service` as the REST routes do;
values are JSON (what a model writes and reads)."""

import base64
import json
import logging
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from app.core.pagination import CURSOR_DESCRIPTION, CURSOR_SCHEMA, INT64_MAX
from app.mcp.calls import call_of, ok
from app.mcp.registry import ToolSpec
from app.shared_memory import etag, responses, service
from app.shared_memory.keys import MAX_KEY_CHARS, MAX_SCOPE_CHARS, Namespace
from app.shared_memory.schemas import SharedMemoryKeyList, SharedMemoryPut
from app.shared_memory.ttl import TtlSeconds

NamespaceArg = Annotated[
    Namespace,
    Field(
        description=(
            "`agent`: private to you (no scope_id). `global`: the whole tenant (no scope_id). "
            "`workflow`, `swarm`, `debate`: shared by everyone who knows the scope_id. `session`: "
            "scope_id is the id of one of your sessions."
        )
    ),
]
KeyArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_KEY_CHARS,
        description=("The entry's key; `/` separates segments (`plan/status`)."),
    ),
]
ScopeArg = Annotated[
    str | None,
    Field(
        max_length=MAX_SCOPE_CHARS,
        description=(
            "Required for workflow, swarm, debate and session; not allowed for agent and global."
        ),
    ),
]
IfVersion = Annotated[
    int | None,
    Field(
        ge=0,
        le=INT64_MAX,
        description=(
            "Only if the entry is still at this version (from a get or put): a stale version is "
            "`version_conflict`, a missing entry `precondition_failed`."
        ),
    ),
]

log = logging.getLogger("loom.shared_memory")


def _entry(loaded: service.Loaded, key: str) -> dict[str, Any]:
    out = loaded.head(key)
    out.pop("created")
    if loaded.is_json:
        out["value"] = json.loads(loaded.data)
    elif loaded.content_type.startswith("text/"):
        out["value"] = loaded.data.decode("utf-8", "replace")
    else:  # raw bytes a REST client stored
        out["value_base64"] = base64.b64encode(loaded.data).decode()
    return out


async def _published(publish: service.Publish) -> None:
    """Run a write's publish once its transaction has committed; never fails the call (as
    a route's `app.core.db.after_commit`)."""
    try:
        await publish()
    except Exception:
        log.exception("shared memory: publishing a change failed")


def _if_match(version: int | None) -> str | None:
    return etag.format_etag(version) if version is not None else None


async def shared_memory_get(
    ctx: Context, namespace: NamespaceArg, key: KeyArg, scope_id: ScopeArg = None
) -> CallToolResult:
    call = call_of(ctx)
    state = call.state
    loaded = await service.read(
        state.connection,
        responses.runtime_of(state),
        call.caller,
        namespace,
        key,
        scope_id,
    )
    return ok(_entry(loaded, key))


async def shared_memory_put(
    ctx: Context,
    namespace: NamespaceArg,
    key: KeyArg,
    value: Annotated[
        Any, Field(description="Any JSON value: object, array, string, number, boolean or null.")
    ],
    scope_id: ScopeArg = None,
    if_version: IfVersion = None,
    ttl_seconds: Annotated[
        TtlSeconds | None,
        Field(description=("Expire the entry after this many seconds (default: never).")),
    ] = None,
    metadata: Annotated[
        dict[str, Any] | None, Field(description=("Free-form metadata stored with the entry."))
    ] = None,
) -> CallToolResult:
    call = call_of(ctx)
    state = call.state
    settings = state.settings
    body = SharedMemoryPut.model_validate(
        {"value": value, "metadata": metadata or {}, "ttl_seconds": ttl_seconds}
    )
    async with state.connection() as conn, conn.transaction():
        addr = await service.resolve(conn, call.caller, namespace, key, scope_id)
        loaded, created, publish = await service.write(
            conn,
            responses.runtime_of(state),
            call.caller,
            addr,
            responses.dump_json(body.value),
            content_type="application/json",
            metadata=body.metadata,
            ttl_seconds=body.ttl_seconds,
            if_match=_if_match(if_version),
            max_bytes=settings.shared_memory_max_value_bytes,
            compress_threshold=settings.shared_memory_compress_threshold_bytes,
            require_if_match=settings.shared_memory_require_if_match,
        )
    await _published(publish)
    return ok(loaded.head(key, created))


async def shared_memory_list(
    ctx: Context,
    namespace: NamespaceArg,
    scope_id: ScopeArg = None,
    prefix: Annotated[
        str, Field(max_length=MAX_KEY_CHARS, description=("Only keys starting with this."))
    ] = "",
    limit: Annotated[int, Field(ge=1, le=1000, description="Keys per page.")] = 100,
    cursor: Annotated[
        str | None, Field(description=CURSOR_DESCRIPTION, json_schema_extra=CURSOR_SCHEMA)
    ] = None,
) -> CallToolResult:
    call = call_of(ctx)
    async with call.state.connection() as conn:
        page = await responses.list_keys(
            conn, call.caller, namespace, scope_id, prefix, limit, cursor
        )
    return ok(SharedMemoryKeyList.model_validate(page))


async def shared_memory_delete(
    ctx: Context,
    namespace: NamespaceArg,
    key: KeyArg,
    scope_id: ScopeArg = None,
    if_version: IfVersion = None,
) -> CallToolResult:
    call = call_of(ctx)
    state = call.state
    async with state.connection() as conn, conn.transaction():
        addr = await service.resolve(conn, call.caller, namespace, key, scope_id)
        version, publish = await service.delete(
            conn,
            responses.runtime_of(state),
            call.caller,
            addr,
            if_match=_if_match(if_version),
            require_if_match=state.settings.shared_memory_require_if_match,
        )
    await _published(publish)
    return ok(
        {
            "namespace": namespace.value,
            "key": key,
            "scope_id": addr.scope_id or None,
            "deleted_version": version,
        }
    )


TOOLS = (
    ToolSpec(
        shared_memory_get,
        (
            "Read an entry of shared memory: its value, version and metadata. "
            "`entry_not_found` when there is none."
        ),
        ToolAnnotations(read_only_hint=True),
    ),
    ToolSpec(
        shared_memory_put,
        (
            "Write a JSON value to shared memory (creates or replaces it) and return its new "
            "version. For a read-modify-write, pass the version you read as if_version so a "
            "concurrent change is not overwritten. Other agents and runtimes see it at once "
            "(the agent namespace only you)."
        ),
        ToolAnnotations(read_only_hint=False, destructive_hint=True),
    ),
    ToolSpec(
        shared_memory_list,
        (
            "List the keys of a shared-memory namespace (or of one scope_id), optionally "
            "under a prefix, in key order, with versions and sizes; pass next_cursor back for "
            "the next page."
        ),
        ToolAnnotations(read_only_hint=True),
    ),
    ToolSpec(
        shared_memory_delete,
        (
            "Delete an entry of shared memory. `entry_referenced` while a message still "
            "holds its data reference."
        ),
        ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    ),
)

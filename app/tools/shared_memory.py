"""Handlers of the built-in `shared_memory_*` agent tools (definitions: shared_memory_defs).

Tools act as the *session's* agent (decision): the `agent` namespace of a tool call is the
private space of the agent whose conversation it is, and a tool call sees exactly what that
agent's own key would see (the `session` namespace of its own sessions only; see
`app.sessions.access`), whatever key the runtime used, so a model's tool call can never reach
further than its agent.
Values larger than the tool-result offload threshold come back as a data reference, so a
read can never flood the context.
"""

import json
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.auth.caller import Caller
from app.core.db import after_commit
from app.core.pagination import INT64_MAX
from app.shared_memory import etag, keys, repository, service
from app.shared_memory.keys import Namespace
from app.shared_memory.refs import render
from app.shared_memory.responses import dump_json
from app.shared_memory.runtime import SharedMemoryRuntime
from app.shared_memory.ttl import TtlSeconds
from app.tools.catalog import ToolCatalog
from app.tools.registry import ToolContext, parse_args


class _Target(BaseModel):
    model_config = ConfigDict(extra="forbid")
    namespace: Namespace
    key: str = Field(min_length=1, max_length=256)
    scope_id: str | None = Field(default=None, max_length=256)


class _Write(_Target):
    value: Any = None
    ttl_seconds: TtlSeconds | None = None
    if_version: int | None = Field(default=None, ge=0, le=INT64_MAX)


class _List(BaseModel):
    model_config = ConfigDict(extra="forbid")
    namespace: Namespace
    scope_id: str | None = Field(default=None, max_length=256)
    prefix: str = Field(default="", max_length=256)
    limit: int = Field(default=50, ge=1, le=200)


def _caller(ctx: ToolContext) -> Caller:
    return replace(ctx.caller, role="agent", agent_id=ctx.session.agent_id)


async def shared_memory_read(ctx: ToolContext, args: dict[str, Any]) -> Any:
    a = parse_args(_Target, args)
    caller = _caller(ctx)
    conn = ctx.db
    addr = await service.resolve(conn, caller, a.namespace, a.key, a.scope_id)
    loaded = await service.read_at(conn, ctx.state.parts[SharedMemoryRuntime], caller, addr)
    out: dict[str, Any] = {
        "namespace": a.namespace.value,
        "key": a.key,
        "version": loaded.version,
        "content_type": loaded.content_type,
    }
    if loaded.size_bytes > ctx.state.settings.tool_result_offload_bytes:
        out["reference"] = render(loaded.reference())
    elif loaded.is_json:
        out["value"] = json.loads(loaded.data)
    elif loaded.content_type.startswith("text/"):
        out["value"] = loaded.data.decode("utf-8", "replace")
    else:
        out["reference"] = render(loaded.reference())
    return out


async def shared_memory_write(ctx: ToolContext, args: dict[str, Any]) -> Any:
    a = parse_args(_Write, args)
    caller = _caller(ctx)
    s = ctx.state.settings
    conn = ctx.db
    addr = await service.resolve(conn, caller, a.namespace, a.key, a.scope_id)
    if_match = etag.format_etag(a.if_version) if a.if_version is not None else None
    loaded, created, publish = await service.write(
        conn,
        ctx.state.parts[SharedMemoryRuntime],
        caller,
        addr,
        dump_json(a.value),
        content_type="application/json",
        metadata={"via": "tool"},
        ttl_seconds=a.ttl_seconds,
        if_match=if_match,
        max_bytes=s.shared_memory_max_value_bytes,
        compress_threshold=s.shared_memory_compress_threshold_bytes,
        require_if_match=s.shared_memory_require_if_match,
    )
    after_commit(ctx.db, publish)
    return {
        "namespace": a.namespace.value,
        "key": a.key,
        "version": loaded.version,
        "created": created,
    }


async def shared_memory_list(ctx: ToolContext, args: dict[str, Any]) -> Any:
    a = parse_args(_List, args)
    caller = _caller(ctx)
    conn = ctx.db
    addr = await service.resolve(conn, caller, a.namespace, None, a.scope_id)
    sprefix = keys.storage_prefix(a.namespace, addr.scope_id, a.prefix)
    rows = await repository.list_keys(
        conn,
        caller.tenant_id,
        a.namespace.value,
        addr.scope_id,
        sprefix,
        None,
        a.limit + 1,
        service._now(),
    )
    return {
        "namespace": a.namespace.value,
        "keys": [
            keys.public_key(a.namespace, addr.scope_id, r.storage_key) for r in rows[: a.limit]
        ],
        "truncated": len(rows) > a.limit,
    }


async def shared_memory_delete(ctx: ToolContext, args: dict[str, Any]) -> Any:
    a = parse_args(_Target, args)
    caller = _caller(ctx)
    conn = ctx.db
    addr = await service.resolve(conn, caller, a.namespace, a.key, a.scope_id)
    _, publish = await service.delete(
        conn,
        ctx.state.parts[SharedMemoryRuntime],
        caller,
        addr,
        if_match=None,
        require_if_match=False,
    )
    after_commit(ctx.db, publish)
    return {"namespace": a.namespace.value, "key": a.key, "deleted": True}


def register(catalog: ToolCatalog) -> None:
    """The shared-memory tools' handlers (`app.tools.built_in.catalog`)."""
    catalog.register_handler("shared_memory_read", shared_memory_read)
    catalog.register_handler("shared_memory_write", shared_memory_write)
    catalog.register_handler("shared_memory_list", shared_memory_list)
    catalog.register_handler("shared_memory_delete", shared_memory_delete)

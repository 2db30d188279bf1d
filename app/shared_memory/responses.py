"""HTTP glue for shared memory: responses, headers, listing, stats and the watch stream."""

import json
from typing import Any

import asyncpg
from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from app.auth.caller import Caller
from app.core.errors import ServiceUnavailable
from app.core.pagination import decode_cursor, fetch_limit, invalid_cursor, page
from app.shared_memory import etag, keys, repository, service
from app.shared_memory.keys import Namespace
from app.shared_memory.runtime import SharedMemoryRuntime
from app.shared_memory.watch import public_event, sse, stream
from app.state import AppState, app_state

DEFAULT_HEARTBEAT = 15.0


def runtime(request: Request) -> SharedMemoryRuntime:
    return runtime_of(app_state(request.app))


def runtime_of(state: AppState) -> SharedMemoryRuntime:
    rt = state.parts[SharedMemoryRuntime]
    if rt is None:
        raise ServiceUnavailable("Shared memory is not started.")
    return rt


def dump_json(value: Any) -> bytes:
    """Compact UTF-8 JSON: the stored form of JSON values (and the checksummed bytes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def set_headers(response: Response, loaded: service.Loaded) -> None:
    h = response.headers
    h["ETag"] = etag.format_etag(loaded.version)
    h["X-Loom-Version"] = str(loaded.version)
    h["X-Loom-Checksum"] = f"sha256={loaded.sha256}"
    h["X-Loom-Storage-Location"] = loaded.location
    h["X-Loom-Compressed"] = "true" if loaded.compressed else "false"
    h["X-Loom-Ref-Id"] = loaded.ref_id


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(dump_json(payload), status_code=status, media_type="application/json")


def raw_response(loaded: service.Loaded) -> Response:
    resp = Response(loaded.data, media_type=loaded.content_type)
    set_headers(resp, loaded)
    return resp


def _head_json(loaded: service.Loaded, key: str) -> bytes:
    head = loaded.head(key)
    head.pop("created")
    return json.dumps(head, separators=(",", ":"), ensure_ascii=False, default=_iso).encode()


def _iso(x: Any) -> str:
    return x.isoformat()


def entry_response(
    loaded: service.Loaded, key: str, *, ref: bool, if_none_match: str | None
) -> Response:
    if if_none_match is not None and etag.matches(
        etag.parse_match_header(if_none_match), loaded.version
    ):
        resp = Response(status_code=304)
        set_headers(resp, loaded)
        return resp
    if ref:
        resp = json_response(loaded.reference().model_dump(mode="json"))
    elif loaded.is_json:
        # The stored bytes are already compact JSON: splice them in instead of re-encoding.
        body = _head_json(loaded, key)[:-1] + b',"value":' + loaded.data + b"}"
        resp = Response(body, media_type="application/json")
    else:
        return raw_response(loaded)
    set_headers(resp, loaded)
    return resp


async def list_keys(
    conn: asyncpg.Connection,
    caller: Caller,
    namespace: Namespace,
    scope_id: str | None,
    prefix: str,
    limit: int,
    cursor: str | None,
) -> dict[str, Any]:
    addr = await service.resolve(conn, caller, namespace, None, scope_id)
    sprefix = keys.storage_prefix(namespace, addr.scope_id, prefix)
    after = None
    data = decode_cursor(cursor, {"after": str})
    if data is not None:
        after = data["after"]
        if not after.startswith(sprefix):
            raise invalid_cursor()
    rows = await repository.list_keys(
        conn,
        caller.tenant_id,
        namespace.value,
        addr.scope_id,
        sprefix,
        after,
        fetch_limit(limit),
        service._now(),
    )
    shown, nxt = page(rows, limit, lambda r: {"after": r.storage_key})
    items = [
        {
            "key": keys.public_key(namespace, addr.scope_id, r.storage_key),
            "version": r.version,
            "size_bytes": r.size_bytes,
            "content_type": r.content_type,
            "expires_at": r.expires_at,
            "updated_at": r.updated_at,
        }
        for r in shown
    ]
    return {
        "namespace": namespace,
        "scope_id": addr.scope_id or None,
        "items": items,
        "next_cursor": nxt,
    }


async def stats(
    conn: asyncpg.Connection, rt: SharedMemoryRuntime, caller: Caller
) -> dict[str, Any]:
    totals = {
        r[0]: r
        for r in await repository.namespace_totals(
            conn,
            caller.tenant_id,
            caller.agent_id,
            service._now(),
            own_sessions_only=caller.role == "agent",
        )
    }
    counts = await rt.read_counts(str(caller.tenant_id))
    out = []
    for ns in Namespace:
        t = totals.get(ns.value)
        out.append(
            {
                "namespace": ns,
                "keys": t[1] if t else 0,
                "bytes": t[2] if t else 0,
                "stored_bytes": t[3] if t else 0,
                **{
                    name: counts[(ns.value, name)] for name in ("reads", "writes", "hits", "misses")
                },
            }
        )
    tier = rt.tier.stats()
    return {
        "namespaces": out,
        "memory_tier": {
            "bytes": tier.bytes,
            "items": tier.items,
            "max_bytes": tier.max_bytes,
            "evictions": tier.evictions,
            "hits": tier.hits,
            "misses": tier.misses,
        },
    }


async def watch(
    conn: asyncpg.Connection,
    rt: SharedMemoryRuntime,
    caller: Caller,
    request: Request,
    namespace: Namespace,
    scope_id: str | None,
    prefix: str,
    include_initial: bool,
    heartbeat: float | None,
) -> StreamingResponse:
    """The event stream. `conn` (the route's) reads the initial state only: the route's
    connection goes back to the pool when the route returns the stream, which may stay
    open for hours (`DbDep` ends with the route function)."""
    addr = await service.resolve(conn, caller, namespace, None, scope_id)
    scope = addr.scope_id
    sprefix = keys.storage_prefix(namespace, scope, prefix)
    tenant = str(caller.tenant_id)
    # Subscribe before reading the initial state: a write in between shows up twice at
    # worst (clients dedupe by version), never not at all.
    watcher = rt.add_watcher(tenant, namespace.value, scope, sprefix)
    scope_out = scope or None
    initial: list[bytes] = []
    try:
        if include_initial:
            initial = await _initial(conn, caller, namespace, scope, sprefix, scope_out)
    except BaseException:
        rt.remove_watcher(tenant, namespace.value, scope, watcher)
        raise

    def render(event: dict[str, Any]) -> bytes | None:
        try:
            key = keys.public_key(namespace, scope, event["sk"])
        except ValueError:
            return None  # not this watcher's key space (cannot happen: prefix-filtered)
        name, data = public_event(event, key, scope_out)
        return sse(name, data, str(event.get("v") or ""))

    async def frames() -> Any:
        try:
            async for frame in stream(
                watcher, initial, render, heartbeat or DEFAULT_HEARTBEAT, request.is_disconnected
            ):
                yield frame
        finally:
            rt.remove_watcher(tenant, namespace.value, scope, watcher)

    return StreamingResponse(
        frames(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _initial(
    conn: asyncpg.Connection,
    caller: Caller,
    namespace: Namespace,
    scope: str,
    sprefix: str,
    scope_out: str | None,
) -> list[bytes]:
    frames: list[bytes] = []
    after: str | None = None
    while True:
        rows = await repository.list_keys(
            conn, caller.tenant_id, namespace.value, scope, sprefix, after, 500, service._now()
        )
        for r in rows:
            event = {
                "op": "put",
                "ns": namespace.value,
                "v": r.version,
                "sz": r.size_bytes,
                "ct": r.content_type,
                "cs": r.sha256,
                "w": r.writer_agent_id,
                "at": r.updated_at.isoformat(),
            }
            key = keys.public_key(namespace, scope, r.storage_key)
            name, data = public_event(event, key, scope_out, initial=True)
            frames.append(sse(name, data, str(r.version)))
        if len(rows) < 500:
            return frames
        after = rows[-1].storage_key

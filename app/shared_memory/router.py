"""HTTP for shared memory: entry CRUD, key listing, stats, watch (SSE), data references.

PUT body: `Content-Type: application/json` -> `{"value": <JSON>, "metadata": {...},
"ttl_seconds": n}`; any other content type -> the raw bytes are the value (metadata in the
`X-Loom-Metadata` header as a JSON object, TTL in the `ttl_seconds` query parameter).
GET of a JSON entry returns the entry description with `value`; of a raw entry, the bytes
with their content type. Either way the headers carry `ETag`, `X-Loom-Version`,
`X-Loom-Checksum: sha256=<hex>`, `X-Loom-Storage-Location: memory|postgres`,
`X-Loom-Compressed` and `X-Loom-Ref-Id`. Preconditions (If-Match, If-None-Match): see
`app.shared_memory.etag`.
"""

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from app.auth.deps import CallerDep, DbDep
from app.core import jsonlimits
from app.core.db import after_commit
from app.core.errors import ERROR_RESPONSES, BadRequest, ErrorEnvelope, Unprocessable
from app.core.pagination import CursorQuery
from app.shared_memory import etag, examples, responses, service
from app.shared_memory.errors import ValueTooLarge
from app.shared_memory.keys import (
    KEY_PATTERN,
    MAX_KEY_CHARS,
    MAX_SCOPE_CHARS,
    PREFIX_PATTERN,
    SCOPE_ID_PATTERN,
    Namespace,
)
from app.shared_memory.refs import DataReference
from app.shared_memory.schemas import (
    SharedMemoryEntryPublic,
    SharedMemoryKeyList,
    SharedMemoryPut,
    SharedMemoryStats,
)
from app.shared_memory.ttl import MAX_TTL_SECONDS
from app.state import app_state

router = APIRouter(tags=["shared-memory"], responses=ERROR_RESPONSES)

# FastAPI's `responses` type: status code (or "default") -> OpenAPI response fields.
Responses = dict[int | str, dict[str, Any]]

_EXTRA: Responses = {c: {"model": ErrorEnvelope} for c in (412, 428)}
_RESP_500: Responses = {
    500: {
        "model": ErrorEnvelope,
        "description": "integrity_error: stored bytes do not match their SHA-256 (never served)",
    }
}
# The patterns are documentation only (json_schema_extra): keys.py checks the same rules and
# answers 400 invalid_key / invalid_scope.
ScopeQ = Annotated[
    str | None,
    Query(
        max_length=MAX_SCOPE_CHARS,
        description=(
            f"1-{MAX_SCOPE_CHARS} characters without control characters or whitespace other than "
            "the plain space; empty means absent. Required (400 invalid_scope without it) for "
            "workflow/swarm/debate/session (for session: the id of a session of your tenant); "
            "refused (400) for global and agent (agent is scoped by the authenticated agent)."
        ),
        json_schema_extra={"pattern": SCOPE_ID_PATTERN},
    ),
]
KeyP = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_KEY_CHARS,
        description=(
            f"1-{MAX_KEY_CHARS} characters, no control characters, invisible format characters or "
            "whitespace other than inner spaces; `/` separates segments (none empty, `.` or `..`); "
            "`watch` is reserved."
        ),
        json_schema_extra={"pattern": KEY_PATTERN},
    ),
]
PrefixQ = Annotated[
    str,
    Query(
        max_length=MAX_KEY_CHARS,
        description=(
            "Only keys starting with this (same characters as a key; no leading or trailing space)."
        ),
        json_schema_extra={"pattern": PREFIX_PATTERN},
    ),
]
# `*` or a comma-separated list of quoted (`"7"`) or weak (`W/"7"`) tags (see etag.py);
# anything else is 400 invalid_etag.
_TAG = r'[ \t]*(?:W/[^,]*|"[^,]*"|)[ \t]*'
ETAGS = {"pattern": rf"^(?:[ \t]*\*[ \t]*|{_TAG}(?:,{_TAG})*)$"}
IfMatch = Annotated[
    str,
    Header(
        description=(
            "Compare-and-set: a stale version is 409; If-Match on a missing entry is 412."
        ),
        json_schema_extra=ETAGS,
    ),
]
IfNoneMatch = Annotated[str, Header(description="`*`: create only (412)", json_schema_extra=ETAGS)]
# No body (and no Content-Type) stores an empty raw value.
PUT_BODY = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {
                "schema": SharedMemoryPut.model_json_schema(),
                "examples": examples.PUT_JSON,
            },
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "text/plain": {"schema": {"type": "string"}, "examples": examples.PUT_TEXT},
        },
    },
    "parameters": [
        {
            "name": "X-Loom-Metadata",
            "in": "header",
            "required": False,
            "description": "Raw bodies: the entry's metadata (JSON bodies carry it in `metadata`). "
            "Anything but a JSON object is 400 invalid_metadata.",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    ],
}


@router.get(
    "/shared-memory/stats",
    response_model=SharedMemoryStats,
    summary="Shared memory statistics per namespace",
)
async def shared_memory_stats(db: DbDep, caller: CallerDep, request: Request) -> Any:
    """Per namespace: live keys and bytes you can see, reads, writes, tier hits and misses."""
    return await responses.stats(db, responses.runtime(request), caller)


@router.get(
    "/shared-memory/{namespace}/watch",
    response_class=StreamingResponse,
    summary="Watch a namespace for changes (Server-Sent Events)",
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "Server-Sent Events: ready, put, delete, "
            "heartbeat, and a final dropped/closed event",
        }
    },
)
async def watch_shared_memory(
    namespace: Namespace,
    db: DbDep,
    caller: CallerDep,
    request: Request,
    scope_id: ScopeQ = None,
    prefix: PrefixQ = "",
    include_initial: bool = False,
    heartbeat_seconds: Annotated[float | None, Query(ge=0.2, le=300)] = None,
) -> StreamingResponse:
    """Stream puts and deletes under `prefix` (agent namespace: only your own keys)."""
    return await responses.watch(
        db,
        responses.runtime(request),
        caller,
        request,
        namespace,
        scope_id,
        prefix,
        include_initial,
        heartbeat_seconds,
    )


@router.get(
    "/shared-memory/{namespace}",
    response_model=SharedMemoryKeyList,
    summary="List the keys of a namespace",
)
async def list_shared_memory_keys(
    namespace: Namespace,
    db: DbDep,
    caller: CallerDep,
    scope_id: ScopeQ = None,
    prefix: PrefixQ = "",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: CursorQuery = None,
) -> Any:
    """Keys (without any agent prefix) in key order, cursor-paginated."""
    conn = db
    return await responses.list_keys(conn, caller, namespace, scope_id, prefix, limit, cursor)


@router.put(
    "/shared-memory/{namespace}/{key:path}",
    response_model=SharedMemoryEntryPublic,
    summary="Write an entry",
    responses={**_EXTRA, 201: {"model": SharedMemoryEntryPublic}},
    openapi_extra=PUT_BODY,
)
async def put_shared_memory_entry(
    namespace: Namespace,
    key: KeyP,
    db: DbDep,
    caller: CallerDep,
    request: Request,
    response: Response,
    scope_id: ScopeQ = None,
    ttl_seconds: Annotated[int | None, Query(ge=1, le=MAX_TTL_SECONDS)] = None,
    if_match: IfMatch = None,  # type: ignore[assignment]
    if_none_match: IfNoneMatch = None,  # type: ignore[assignment]
) -> Any:
    """Create or replace an entry: 201 when created, 200 when replaced."""
    # X-Loom-Metadata is declared in PUT_BODY (a JSON object); checked whatever the body.
    header_metadata = _metadata_header(request.headers.get("x-loom-metadata"))
    settings = app_state(request.app).settings
    max_bytes = settings.shared_memory_max_value_bytes
    raw = await _read_body(request, 2 * max_bytes + 65536, max_bytes)
    ctype = (request.headers.get("content-type") or "application/octet-stream").strip()
    if ctype.split(";")[0].strip().lower() == "application/json":
        body = _json_body(raw)
        data = responses.dump_json(body.value)
        ctype, metadata = "application/json", body.metadata
        ttl = body.ttl_seconds if body.ttl_seconds is not None else ttl_seconds
    else:
        data, metadata, ttl = raw, header_metadata, ttl_seconds
        if len(ctype) > 255:
            raise BadRequest("Content-Type is too long.", code="invalid_content_type")
    _check_tags(if_match, if_none_match)
    conn = db
    addr = await service.resolve(conn, caller, namespace, key, scope_id)
    loaded, created, publish = await service.write(
        conn,
        responses.runtime(request),
        caller,
        addr,
        data,
        content_type=ctype,
        metadata=metadata,
        ttl_seconds=ttl,
        if_match=if_match,
        if_none_match=if_none_match,
        max_bytes=max_bytes,
        compress_threshold=settings.shared_memory_compress_threshold_bytes,
        require_if_match=settings.shared_memory_require_if_match,
    )
    after_commit(db, publish)
    response.status_code = 201 if created else 200
    responses.set_headers(response, loaded)
    return loaded.head(key, created)


# a raw entry is answered with the content type it was stored with (any the PUT accepted)
_RAW_TYPES: dict[str, Any] = {"application/octet-stream": {}, "text/plain": {}, "*/*": {}}


@router.get(
    "/shared-memory/{namespace}/{key:path}",
    response_model=None,
    summary="Read an entry",
    responses={
        200: {
            "model": SharedMemoryEntryPublic | DataReference,
            "description": "JSON entry (with `value`), or its data reference "
            "with `ref=true`; a raw entry's bytes with the content type "
            "they were stored with",
            "content": _RAW_TYPES,
        },
        304: {"description": "If-None-Match matched"},
        **_RESP_500,
    },
)
async def get_shared_memory_entry(
    namespace: Namespace,
    key: KeyP,
    caller: CallerDep,
    request: Request,
    scope_id: ScopeQ = None,
    ref: Annotated[bool, Query(description="return the data reference only")] = False,
    if_none_match: Annotated[str, Header(json_schema_extra=ETAGS)] = None,  # type: ignore[assignment]
) -> Response:
    """The value (JSON entries: description + `value`; raw: the bytes), or its reference."""
    state = app_state(request.app)
    loaded = await service.read(
        state.connection,
        responses.runtime_of(state),
        caller,
        namespace,
        key,
        scope_id,
    )
    return responses.entry_response(loaded, key, ref=ref, if_none_match=if_none_match)


@router.delete(
    "/shared-memory/{namespace}/{key:path}",
    status_code=204,
    responses=_EXTRA,
    summary="Delete an entry",
)
async def delete_shared_memory_entry(
    namespace: Namespace,
    key: KeyP,
    db: DbDep,
    caller: CallerDep,
    request: Request,
    scope_id: ScopeQ = None,
    if_match: IfMatch = None,  # type: ignore[assignment]
) -> Response:
    """Delete an entry (409 `entry_referenced` while a message holds its reference)."""
    _check_tags(if_match, None)
    conn = db
    addr = await service.resolve(conn, caller, namespace, key, scope_id)
    _, publish = await service.delete(
        conn,
        responses.runtime(request),
        caller,
        addr,
        if_match=if_match,
        require_if_match=app_state(request.app).settings.shared_memory_require_if_match,
    )
    after_commit(db, publish)
    return Response(status_code=204)


@router.get(
    "/refs/{ref_id}",
    response_model=None,
    summary="Read the data behind a reference",
    responses={
        200: {
            "model": DataReference,
            "description": "the bytes with their "
            "content type; with `meta=true` the reference (JSON)",
            "content": _RAW_TYPES,
        },
        **_RESP_500,
    },
)
async def get_data_reference(
    ref_id: Annotated[str, Path(max_length=64)],
    db: DbDep,
    caller: CallerDep,
    request: Request,
    meta: Annotated[bool, Query(description="return the reference, not the data")] = False,
) -> Response:
    """The full data behind a `ref_...` id (raw bytes with their content type)."""
    conn = db
    loaded = await service.resolve_ref(conn, responses.runtime(request), caller, ref_id)
    if meta:
        return responses.json_response(loaded.reference().model_dump(mode="json"))
    return responses.raw_response(loaded)


def _check_tags(*headers: str | None) -> None:
    """400 invalid_etag for a malformed If-Match/If-None-Match, before any lookup."""
    for value in headers:
        if value is not None:
            etag.parse_match_header(value)


async def _read_body(request: Request, cap: int, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise ValueTooLarge(f"The value is over the {max_bytes}-byte limit.")
        chunks.append(chunk)
    return b"".join(chunks)


def _json_body(raw: bytes) -> SharedMemoryPut:
    try:
        # (its nesting was checked on the raw bytes by app.core.limits)
        parsed = json.loads(raw, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:
        raise Unprocessable("The body is not valid JSON.", code="invalid_json") from exc
    try:
        return SharedMemoryPut.model_validate(parsed)
    except ValueError as exc:
        errors = exc.errors() if isinstance(exc, ValidationError) else []
        raise Unprocessable(
            "The body is not a valid entry.",
            details=[
                {"loc": ["body", *e.get("loc", ())], "msg": e.get("msg"), "type": e.get("type")}
                for e in errors
            ],
        ) from exc


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _metadata_header(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = jsonlimits.loads(raw, parse_constant=_no_constants)
    except jsonlimits.JsonTooDeep as exc:
        raise Unprocessable(
            f"X-Loom-Metadata: {exc}",
            code="json_too_deep",
            details=[exc.detail(["header", "x-loom-metadata"])],
        ) from exc
    except ValueError as exc:
        raise BadRequest("X-Loom-Metadata must be a JSON object.", code="invalid_metadata") from exc
    if not isinstance(value, dict):
        raise BadRequest("X-Loom-Metadata must be a JSON object.", code="invalid_metadata")
    return value

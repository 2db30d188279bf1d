"""Export (NDJSON, streamed) and import: a user, a session, a whole tenant."""

import logging
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from app.auth.caller import Caller
from app.auth.deps import CallerDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core import deadline
from app.core.db_errors import is_connection_error
from app.core.errors import ERROR_RESPONSES, Unprocessable
from app.portability import export, importer
from app.portability import format as format_
from app.portability.checks import Limits
from app.portability.format import FormatError
from app.sessions.deps import SessionDep
from app.state import AppState, app_state
from app.users import access as users_access
from app.users import repository as users_repository

log = logging.getLogger("loom.portability")
router = APIRouter(tags=["portability"], responses=ERROR_RESPONSES)
NDJSON = "application/x-ndjson"
_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {NDJSON: {"schema": {"type": "string"}}},
        "description": "NDJSON: a header line, one line per row, an end line with the count per "
        "kind (see the README).",
    }
}


def _streamed(
    state: AppState,
    caller: Caller,
    scope: dict[str, Any],
    sessions: list[uuid.UUID] | None,
    user_id: str | None,
    name: str,
) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        try:
            async with (
                deadline.unbounded(),  # as long as the export's size needs (per statement)
                state.connection() as conn,
                conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                async for chunk in export.stream(
                    conn, caller.tenant_id, scope, sessions=sessions, user_id=user_id
                ):
                    yield chunk
        except Exception as exc:  # noqa: BLE001 (the status is sent: the stream says it)
            # the answer's status went out with its first line; a stream cut short by the
            # database says so in its last line instead of just stopping (an import
            # refuses it either way: it has no end line)
            log.warning("export cut short: %s", type(exc).__name__)
            unavailable = is_connection_error(exc) or isinstance(exc, TimeoutError)
            yield (format_.error_line(unavailable) + "\n").encode()

    return StreamingResponse(
        body(),
        media_type=NDJSON,
        headers={"Content-Disposition": f'attachment; filename="{name}.ndjson"'},
    )


@router.get(
    "/users/{user_id}/export",
    response_class=StreamingResponse,
    responses=_STREAM,
    summary="Export a user",
)
async def export_user(
    user_id: Annotated[str, Path(pattern=AGENT_ID_PATTERN)], caller: CallerDep, request: Request
) -> StreamingResponse:
    """Everything about one user as NDJSON: their sessions (an agent key: its own agent's)
    with messages (original seqs and timestamps), memory state, summaries, snapshots and
    shared-memory scope, then the `user/<id>` tier and the facts drawn from those sessions,
    with every version. Streamed from one snapshot, in constant memory."""
    state = app_state(request.app)
    async with state.db_connection() as conn:
        await users_access.require_visible(conn, caller, user_id)
        agent = caller.agent_id if caller.role == "agent" else None
        sessions = await users_repository.session_ids(
            conn, caller.tenant_id, user_id, agent_id=agent
        )
        if not sessions and not await users_repository.fact_count(conn, caller.tenant_id, user_id):
            raise users_access.UserNotFound()
    return _streamed(
        state, caller, {"kind": "user", "id": user_id}, sessions, user_id, f"user-{user_id}"
    )


@router.get(
    "/sessions/{session_id}/export",
    response_class=StreamingResponse,
    responses=_STREAM,
    summary="Export a session",
)
async def export_session(
    session: SessionDep, caller: CallerDep, request: Request
) -> StreamingResponse:
    """One session as NDJSON (the user export's format), with the facts drawn from it."""
    state = app_state(request.app)
    return _streamed(
        state,
        caller,
        {"kind": "session", "id": str(session.id)},
        [session.id],
        None,
        f"session-{session.id}",
    )


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses=_STREAM,
    summary="Export the whole tenant",
)
async def export_tenant(caller: CallerDep, request: Request) -> StreamingResponse:
    """Every session, knowledge item (with versions) and shared-memory entry of the
    tenant as NDJSON. Admin keys (name the tenant with X-Tenant-Id). API keys, agent
    profiles and learned versions are not part of it."""
    state = app_state(request.app)
    caller.require_role("admin")
    return _streamed(state, caller, {"kind": "tenant"}, None, None, "tenant")


class ImportResult(BaseModel):
    inserted: dict[str, int] = Field(description="Rows added, per kind.")
    already_present: dict[str, int] = Field(
        description=(
            "Rows whose id was already there, or that belong to a session or item that was "
            "(left as they were, nothing of them written: importing twice adds nothing)."
        )
    )


@router.post(
    "/import",
    response_model=ImportResult,
    summary="Import an export",
    openapi_extra={
        "requestBody": {"required": True, "content": {NDJSON: {"schema": {"type": "string"}}}}
    },
)
async def import_export(
    request: Request,
    caller: CallerDep,
) -> ImportResult:
    """Import an export (of this or another tenant or instance) into the caller's tenant:
    all or nothing, idempotent by ids. Each line passes the rules of the route that creates
    the same object; a bad line is 422 `invalid_import` naming the line and the field
    (`details.line`, `details.field`), and nothing is imported. A session, memory item or
    shared-memory entry that is already there is left as it is with everything under it,
    counted in `already_present`. Service and admin keys; the body is at most
    LOOM_MAX_REQUEST_BYTES."""
    state = app_state(request.app)
    caller.require_role("service", "admin")
    async with deadline.unbounded(), state.connection() as conn:  # as long as its size needs
        try:
            async with conn.transaction():
                inserted, present = await importer.run(
                    conn,
                    caller.tenant_id,
                    request.stream(),
                    Limits(max_message_bytes=state.settings.max_message_bytes),
                )
        except FormatError as exc:
            raise Unprocessable(
                str(exc),
                code="invalid_import",
                details={"line": exc.line, "field": exc.field, "reason": exc.reason},
            ) from exc
    return ImportResult(inserted=inserted, already_present=present)

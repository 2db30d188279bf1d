"""Sessions: one conversation of one agent."""

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request

from app.auth.deps import CallerDep, DbDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core import tracing
from app.core.db import after_commit, read_only
from app.core.errors import ERROR_RESPONSES
from app.core.pagination import (
    CursorQuery,
    decode_cursor,
    fetch_limit,
    invalid_cursor,
    page,
)
from app.memory.read_models import layer_tokens, layer_tokens_of_page
from app.session_resource import examples, service
from app.session_resource.schemas import (
    SessionCreate,
    SessionList,
    SessionPublic,
    SessionUpdate,
)
from app.sessions import repository
from app.sessions.deps import SessionDep
from app.state import app_state

router = APIRouter(tags=["sessions"], responses=ERROR_RESPONSES)


@router.post("/sessions", status_code=201, response_model=SessionPublic, summary="Start a session")
async def create_session(
    body: Annotated[SessionCreate, Body(openapi_examples=examples.CREATE)],
    db: DbDep,
    caller: CallerDep,
    request: Request,
) -> SessionPublic:
    """Start a session for an agent."""
    state = app_state(request.app)
    with tracing.memory_span("create_memory_store", store_kind="session") as span:
        session = await service.create(
            db,
            caller,
            body,
            on_created=state.parts[service.SessionHooks].created,
        )
        if span is not None:
            span.set_attribute("gen_ai.memory.store.id", str(session.id))
    return service.to_public(session)


@router.get("/sessions", response_model=SessionList, summary="List sessions")
@read_only
async def list_sessions(
    db: DbDep,
    caller: CallerDep,
    agent_id: Annotated[str | None, Query(pattern=AGENT_ID_PATTERN)] = None,
    user_id: Annotated[
        str | None,
        Query(pattern=AGENT_ID_PATTERN, description=("Only the sessions with this user.")),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: CursorQuery = None,
) -> SessionList:
    """List sessions, oldest first, each with its tokens per layer. Agent keys see only
    their own agent's sessions."""
    if caller.role == "agent":
        caller.require_agent_access(agent_id)
        agent_id = caller.agent_id
    after = None
    data = decode_cursor(cursor, {"t": str, "id": str})
    if data is not None:
        try:
            after = (datetime.fromisoformat(data["t"]), uuid.UUID(data["id"]))
        except ValueError as exc:
            raise invalid_cursor() from exc
    conn = db
    rows = await repository.list_page(
        conn,
        caller.tenant_id,
        agent_id=agent_id,
        after=after,
        limit=fetch_limit(limit),
        user_id=user_id,
    )
    shown, nxt = page(rows, limit, lambda s: {"t": s.created_at.isoformat(), "id": str(s.id)})
    items = [service.to_public(s) for s in shown]
    for item, tokens in zip(items, await layer_tokens_of_page(conn, shown), strict=True):
        item.memory = tokens
    return SessionList(items=items, next_cursor=nxt)


@router.get(
    "/sessions/{session_id}",
    response_model=SessionPublic,
    summary="Get a session with its tokens per layer",
)
@read_only
async def get_session(session: SessionDep, db: DbDep) -> SessionPublic:
    """One session with its counts and tokens per memory layer."""

    public = service.to_public(session)
    public.memory = await layer_tokens(db, session)
    return public


@router.patch(
    "/sessions/{session_id}",
    response_model=SessionPublic,
    summary="Change a session's config or metadata",
)
async def update_session(
    body: Annotated[SessionUpdate, Body(openapi_examples=examples.UPDATE)],
    session: SessionDep,
    db: DbDep,
    request: Request,
) -> SessionPublic:
    """Change config fields, replace metadata, or end the session (`status: ended`: its
    fact extraction runs at once; an append reopens it)."""
    state = app_state(request.app)
    ending = body.status == "ended" and session.status != "ended"
    session = await service.update(db, session, body)
    if ending:
        after_commit(db, lambda: service.ended(session, state.parts[service.SessionHooks].ended))
    return service.to_public(session)

"""Swap search over one session, or over an agent's or the tenant's sessions."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Request

from app.auth.deps import CallerDep
from app.core.errors import ERROR_RESPONSES
from app.search import examples, requests
from app.search.deps import SearchEnvDep
from app.search.schemas import SearchCreate, SearchPublic, SessionSearchCreate
from app.state import app_state

router = APIRouter(tags=["search"], responses=ERROR_RESPONSES)


@router.post(
    "/sessions/{session_id}/search",
    response_model=SearchPublic,
    summary="Search one session's full history",
)
async def search_session(
    session_id: uuid.UUID,
    body: Annotated[SessionSearchCreate, Body(openapi_examples=examples.SESSION)],
    caller: CallerDep,
    request: Request,
    env: SearchEnvDep,
) -> SearchPublic:
    """Search this session's full history: the conversation-aware BM25 top 50 (a message
    ranked with the turns around it), then LLM rerank, top `limit`.

    With `promote: true` the results are promoted into the session's context; 409 when
    they would not fit its budget (nothing is promoted then).
    """
    state = app_state(request.app)
    return await requests.search_session(state, env, caller, session_id, body)


@router.post(
    "/search", response_model=SearchPublic, summary="Search an agent's or the tenant's sessions"
)
async def search_sessions(
    body: Annotated[SearchCreate, Body(openapi_examples=examples.SESSIONS)],
    caller: CallerDep,
    request: Request,
    env: SearchEnvDep,
) -> SearchPublic:
    """Search across the sessions of one agent (`scope=agent`) or of the tenant.

    `scope=agent` searches `agent_id`, by default the caller's effective agent (an agent
    key's own, or a service key's `X-Agent-Id`). Agent keys may not search another agent
    or the whole tenant (403).
    """
    state = app_state(request.app)
    return await requests.search_sessions(state, env, caller, body)

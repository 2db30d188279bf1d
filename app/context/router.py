"""POST /sessions/{id}/context: the ready-to-send context, never over the budget."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Request, Response

from app.auth.deps import CallerDep
from app.context import builder, examples, render
from app.context.recall import SwapRecall, recall_config
from app.context.schemas import ContextPublic, ContextRequest
from app.core.db import transaction
from app.core.errors import ERROR_RESPONSES
from app.memory import repository as memory_repository
from app.memory.fastload import load_for_context
from app.state import app_state

router = APIRouter(tags=["context"], responses=ERROR_RESPONSES)


@router.post("/sessions/{session_id}/context", response_model=ContextPublic,
             summary="Build the ready-to-send context")
async def build_context(
    session_id: uuid.UUID, caller: CallerDep, request: Request,
    body: Annotated[ContextRequest | None, Body(openapi_examples=examples.BUILD)] = None,
) -> Response:
    """Build the context in ``anthropic``, ``openai`` or ``raw`` format, with tokens per
    layer, budget, usage and the compression state. With recall on (the session's
    `config.recall`, or `recall` here) the build also searches the session's swap for the
    newest user message and places the best old turns before L1, within what is free."""
    state = app_state(request.app)
    fmt = body.format if body is not None else "anthropic"
    # one round trip reads the session and its memory (a session made before memory
    # existed gets its empty state first)
    async with state.connection() as conn:
        fast = await load_for_context(conn, caller, session_id)
        if fast is None:
            async with transaction(state.sessionmaker) as db:
                await memory_repository.ensure_state(db, caller.tenant_id, session_id)
            fast = await load_for_context(conn, caller, session_id)
            assert fast is not None
    session, loaded = fast
    recall = recall_config(session.config, body.recall if body is not None else None)
    built = await builder.build(
        state.read_sessionmaker, session, loaded, providers=state.hooks.context_blocks,
        recall=SwapRecall(state, caller.tenant_id, session_id, recall)
        if recall.enabled else None)
    # serialised once, from plain dicts (the shape of ContextPublic, which the OpenAPI
    # document shows; a test compares the two)
    return Response(render.response_json(built, fmt), media_type="application/json")

"""POST /sessions/{id}/context: the ready-to-send context, never over the budget."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Request, Response

from app.auth.deps import CallerDep
from app.context import examples, render, service
from app.context.schemas import ContextPublic, ContextRequest
from app.core.errors import ERROR_RESPONSES
from app.state import app_state

router = APIRouter(tags=["context"], responses=ERROR_RESPONSES)


@router.post(
    "/sessions/{session_id}/context",
    response_model=ContextPublic,
    summary="Build the ready-to-send context",
)
async def build_context(
    session_id: uuid.UUID,
    caller: CallerDep,
    request: Request,
    body: Annotated[ContextRequest | None, Body(openapi_examples=examples.BUILD)] = None,
) -> Response:
    """Build the context in ``anthropic``, ``openai`` or ``raw`` format, with tokens per
    layer, budget, usage and the compression state. With recall on (the session's
    `config.recall`, or `recall` here) the build also searches the session's swap for the
    newest user message and places the best old turns before L1, within what is free.

    Every build has a `context_id`. With the session's `config.audit` (or `record: true`)
    its manifest is stored before the answer is sent; `raw` (or `manifest: true`) returns
    it: every block the model reads with its layer, sources, tokens and why it is there."""
    fmt = body.format if body is not None else "anthropic"
    state = app_state(request.app)
    built, extra, payload = await service.build_and_record(state, caller, session_id, body, fmt)
    # serialised once, from plain dicts (the shape of ContextPublic, which the OpenAPI
    # document shows; a test compares the two)
    return Response(render.response_json(built, fmt, extra, payload), media_type="application/json")

"""The append's lane (`app.core.edge`): POST /v1/sessions/{session_id}/messages answered by
the route's own endpoint, without FastAPI's routing and parameter solving.

A parameter added to the route (a header, a query parameter) must be read here too, or
declined: `tests/core/test_lanes.py` fails until it is."""

import uuid

from fastapi import BackgroundTasks
from starlette.requests import Request
from starlette.responses import Response

from app.auth.deps import get_caller
from app.core.edge import json_model
from app.messages.router import append_messages
from app.messages.schemas import MessagesAppend

IDEMPOTENCY_KEY_MAX = 255  # the route's `Header(max_length=255)`


async def handle(request: Request, session_id: str, body: bytes) -> Response | None:
    """The append, or None (the router answers) for a query string, an `Idempotency-Key`
    over its length, or a body that is not a valid `MessagesAppend` as plain JSON: every
    such request is an error the router words. The answer is the route's: 201 (200 for a
    replay) with `MessagesAppended`, and the deferred work run after it is sent."""
    scope = request.scope
    if scope["query_string"]:
        return None
    idempotency_key = request.headers.get("idempotency-key")
    if idempotency_key is not None and len(idempotency_key) > IDEMPOTENCY_KEY_MAX:
        return None
    parsed = json_model(scope, body, MessagesAppend)
    if parsed is None:
        return None
    caller = await get_caller(request)
    sub = Response()  # what the endpoint sets on its `response` (a replay's 200)
    del sub.headers["content-length"]
    sub.status_code = 201
    background = BackgroundTasks()
    result = await append_messages(
        uuid.UUID(session_id), parsed, caller, request, sub, background, idempotency_key
    )
    response = Response(
        result.model_dump_json().encode(),
        status_code=sub.status_code,
        media_type="application/json",
        background=background,
    )
    response.headers.raw.extend(sub.headers.raw)
    return response

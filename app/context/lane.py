"""The context build's lane (`app.core.edge`): POST /v1/sessions/{session_id}/context
answered by the route's own endpoint, without FastAPI's routing and parameter solving.

A parameter added to the route (a header, a query parameter) must be read here too, or
declined: `tests/core/test_lanes.py` fails until it is."""

import uuid

from starlette.requests import Request
from starlette.responses import Response

from app.auth.deps import get_caller
from app.context.router import build_context
from app.context.schemas import ContextRequest
from app.core.edge import json_model


async def handle(request: Request, session_id: str, body: bytes) -> Response | None:
    """The build, or None (the router answers) for a query string or a body that is not a
    valid `ContextRequest` as plain JSON: every such request is an error the router words."""
    if request.scope["query_string"]:
        return None
    parsed = None
    if body:
        parsed = json_model(request.scope, body, ContextRequest)
        if parsed is None:
            return None
    caller = await get_caller(request)
    return await build_context(uuid.UUID(session_id), caller, request, parsed)

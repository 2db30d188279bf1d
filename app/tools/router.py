"""Built-in agent tools: definitions and execution of one tool_use."""

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query, Request

from app.auth.deps import CallerDep, DbDep
from app.core.errors import ERROR_RESPONSES
from app.memory.layers import openai_tools
from app.sessions.deps import SessionDep
from app.state import app_state
from app.tools import examples, registry
from app.tools.catalog import ToolCatalog
from app.tools.schemas import (
    OpenAIToolPublic,
    ToolCallCreate,
    ToolDefinitionPublic,
    ToolListPublic,
    ToolResultPublic,
)

router = APIRouter(tags=["tools"], responses=ERROR_RESPONSES)


ToolFormat = Annotated[
    Literal["anthropic", "openai"],
    Query(
        alias="format",
        description="`anthropic` tool definitions (default) or `openai` "
        'function tools (`{"type": "function", "function": {name, description, '
        "parameters}}`).",
    ),
]


@router.get(
    "/sessions/{session_id}/tools", response_model=ToolListPublic, summary="List the built-in tools"
)
async def list_session_tools(
    session: SessionDep, request: Request, tool_format: ToolFormat = "anthropic"
) -> ToolListPublic:
    """Definitions of the built-in tools (swap recall/search, shared memory), in the
    Anthropic or OpenAI function-calling shape."""
    definitions = app_state(request.app).parts[ToolCatalog].definitions()
    if tool_format == "openai":
        return ToolListPublic(
            tools=[OpenAIToolPublic.model_validate(t) for t in openai_tools(definitions)]
        )
    return ToolListPublic(tools=[ToolDefinitionPublic.model_validate(d) for d in definitions])


@router.post(
    "/sessions/{session_id}/tool-calls",
    response_model=ToolResultPublic,
    summary="Execute a built-in tool call",
)
async def execute_session_tool_call(
    session: SessionDep,
    body: Annotated[ToolCallCreate, Body(openapi_examples=examples.TOOL_CALL)],
    db: DbDep,
    caller: CallerDep,
    request: Request,
) -> ToolResultPublic:
    """Execute a `tool_use` block in this session and return its `tool_result` block.

    Tool failures (unknown tool, invalid input, over-budget promotion...) are a 200 with
    `is_error: true` and a JSON `{"error": {"code": ...}}` content, as an agent loop
    expects; codes: INVALID_PARAMETER, UNKNOWN_TOOL, TOOL_UNAVAILABLE, SESSION_NOT_FOUND,
    SEARCH_FAILED, FORBIDDEN, CONFLICT, NOT_FOUND, INTERNAL_ERROR, or a domain code.
    """
    ctx = registry.ToolContext(db=db, session=session, caller=caller, request=request)
    outcome = await registry.execute(ctx, body.name, body.input)
    return ToolResultPublic(tool_use_id=body.id, content=outcome.content, is_error=outcome.is_error)

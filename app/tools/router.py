"""Built-in agent tools: definitions and execution of one tool_use."""

from fastapi import APIRouter, Request

from app.auth.deps import CallerDep
from app.core.db import DbDep
from app.core.errors import ERROR_RESPONSES
from app.sessions.deps import SessionDep
from app.tools import registry
from app.tools.schemas import (
    ToolCallCreate,
    ToolDefinitionPublic,
    ToolListPublic,
    ToolResultPublic,
)

router = APIRouter(tags=["tools"], responses=ERROR_RESPONSES)


@router.get("/sessions/{session_id}/tools", response_model=ToolListPublic)
async def list_session_tools(session: SessionDep) -> ToolListPublic:
    """Anthropic tool definitions of the built-in tools (swap recall/search, shared memory)."""
    return ToolListPublic(tools=[ToolDefinitionPublic.model_validate(d)
                                 for d in registry.definitions()])


@router.post("/sessions/{session_id}/tool-calls", response_model=ToolResultPublic)
async def execute_session_tool_call(session: SessionDep, body: ToolCallCreate, db: DbDep,
                                    caller: CallerDep, request: Request) -> ToolResultPublic:
    """Execute a `tool_use` block in this session and return its `tool_result` block.

    Tool failures (unknown tool, invalid input, over-budget promotion...) are a 200 with
    `is_error: true` and a JSON `{"error": {"code": ...}}` content, as an agent loop
    expects; codes: INVALID_PARAMETER, UNKNOWN_TOOL, TOOL_UNAVAILABLE, SESSION_NOT_FOUND,
    SEARCH_FAILED, FORBIDDEN, CONFLICT, NOT_FOUND, INTERNAL_ERROR, or a domain code.
    """
    ctx = registry.ToolContext(db=db, session=session, caller=caller, request=request)
    outcome = await registry.execute(ctx, body.name, body.input)
    return ToolResultPublic(tool_use_id=body.id, content=outcome.content,
                            is_error=outcome.is_error)

"""Facts tools for MCP clients: search_facts and forget_fact, as the caller's
agent (X-Agent-Id for service keys), through the same service as the built-in tools."""

import uuid
from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from app.core.db import transaction
from app.facts import service as facts_service
from app.facts.schemas import FactForget, FactSearch
from app.knowledge.schemas import FACTS_SCOPE_PATTERN
from app.knowledge.versions import actor_of
from app.mcp.calls import call_of, ok
from app.mcp.registry import ToolSpec
from app.tools.facts import FORGET_DESCRIPTION, SEARCH_DESCRIPTION


async def search_facts(
    ctx: Context,
    query: Annotated[
        str,
        Field(
            min_length=1,
            max_length=2000,
            description=("What the facts should be about, in plain words."),
        ),
    ],
    scope: Annotated[
        str,
        Field(
            pattern=FACTS_SCOPE_PATTERN,
            description=("agent (the caller's agent), global, task/<id> or project/<id>."),
        ),
    ] = "agent",
    limit: Annotated[int, Field(ge=1, le=50, description="Most facts returned.")] = 10,
    include_invalidated: Annotated[
        bool, Field(description=("Also return facts that were superseded or forgotten."))
    ] = False,
    as_of: Annotated[
        datetime | None,
        Field(description=("What was true at this time (ISO 8601), instead of now.")),
    ] = None,
) -> CallToolResult:
    call = call_of(ctx)
    body = FactSearch.model_validate(
        {
            "query": query,
            "scope": scope,
            "limit": limit,
            "include_invalidated": include_invalidated,
            "as_of": as_of,
        }
    )
    async with transaction(call.state.db_connection) as db:
        found = await facts_service.search_facts(db, call.caller, body)
    return ok(found)


async def forget_fact(
    ctx: Context,
    id: Annotated[uuid.UUID, Field(description="The fact's id.")],
    reason: Annotated[
        str, Field(min_length=1, max_length=1000, description=("Why it is no longer true."))
    ],
) -> CallToolResult:
    call = call_of(ctx)
    body = FactForget.model_validate({"id": id, "reason": reason})
    async with transaction(call.state.db_connection) as db:
        item = await facts_service.forget_fact(
            db,
            call.caller,
            body.id,
            body.reason,
            actor_of(call.caller, "mcp"),
        )
    return ok(item)


TOOLS = (
    ToolSpec(search_facts, SEARCH_DESCRIPTION, ToolAnnotations(read_only_hint=True)),
    ToolSpec(
        forget_fact,
        FORGET_DESCRIPTION,
        ToolAnnotations(read_only_hint=False, destructive_hint=False),
    ),
)

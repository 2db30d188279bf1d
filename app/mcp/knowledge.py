"""Knowledge tools: store an item, query items with the filter language, build a context
package. Each validates the REST request model and calls `app.knowledge` as the REST
routes do (knowledge belongs to the tenant; isolation is by scope)."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from app.core.db import transaction
from app.core.pagination import CURSOR_DESCRIPTION, CURSOR_SCHEMA
from app.knowledge import packages, service
from app.knowledge.filters import DEFAULT_LIMIT, DEFAULT_ORDER, MAX_LIMIT
from app.knowledge.schemas import (
    FILTERS_DOC,
    ORDER_BY_VALUES,
    ContextPackageCreate,
    MemoryItemCreate,
    MemoryItemQuery,
    TierSharesIn,
)
from app.knowledge.scopes import SCOPE_ID_PATTERN, SCOPE_PATTERN
from app.mcp.calls import call_of, doc, ok
from app.mcp.registry import ToolSpec

# The filter language's full JSON Schema (app.knowledge.schemas.FILTERS_SCHEMA) is ~11 KB,
# too much for a model's tool list: the tools describe it, and the REST validation answers
# `invalid_query` naming every problem.
Filters = Annotated[
    dict[str, Any] | None,
    Field(
        description=(
            FILTERS_DOC + ' Example: {"kind": "decision", "tags": ["billing"], '
            '"importance": {"$gte": 0.7}}.'
        )
    ),
]


async def knowledge_add_item(
    ctx: Context,
    scope: Annotated[str, Field(pattern=SCOPE_PATTERN, description=doc(MemoryItemCreate, "scope"))],
    kind: Annotated[
        str,
        Field(
            min_length=1,
            max_length=100,
            description=("What it is: decision, fact, constraint, todo... (free text)."),
        ),
    ],
    text: Annotated[
        str | None,
        Field(
            max_length=1_000_000,
            description=("The knowledge in words. Give text, payload or both."),
        ),
    ] = None,
    payload: Annotated[Any, Field(description="Structured data (any JSON).")] = None,
    tags: Annotated[
        list[str] | None, Field(max_length=64, description="Labels to filter by.")
    ] = None,
    importance: Annotated[
        float,
        Field(ge=0, le=1, description=("0-1; context packages keep the most important first.")),
    ] = 0.5,
    source: Annotated[
        str | None, Field(max_length=200, description=doc(MemoryItemCreate, "source"))
    ] = None,
) -> CallToolResult:
    call = call_of(ctx)
    body = MemoryItemCreate.model_validate(
        {
            "scope": scope,
            "kind": kind,
            "text": text,
            "payload": payload,
            "tags": tags or [],
            "importance": importance,
            "source": source,
        }
    )
    async with transaction(call.state.db_connection) as db:
        item = await service.create_item(
            db,
            call.caller,
            body,
            max_items=int(call.state.settings.knowledge_max_items),
            via="mcp",
        )
        public = service.to_public(item)
    return ok(public)


async def knowledge_query_items(
    ctx: Context,
    filters: Filters = None,
    order_by: Annotated[
        str,
        Field(
            json_schema_extra={"enum": [*ORDER_BY_VALUES]},
            description=doc(MemoryItemQuery, "order_by"),
        ),
    ] = DEFAULT_ORDER,
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Items per page.")] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None, Field(description=CURSOR_DESCRIPTION, json_schema_extra=CURSOR_SCHEMA)
    ] = None,
) -> CallToolResult:
    call = call_of(ctx)
    body = MemoryItemQuery.model_validate(
        {"filters": filters or {}, "order_by": order_by, "limit": limit, "cursor": cursor}
    )
    async with transaction(call.state.db_connection) as db:
        found = await service.query_items(db, call.caller, body)
    return ok(found)


async def knowledge_build_package(
    ctx: Context,
    budget_tokens: Annotated[
        int, Field(ge=1, le=10_000_000, description=("The most tokens the package may use."))
    ],
    task_id: Annotated[
        str | None,
        Field(pattern=SCOPE_ID_PATTERN, description=("The task tier: items of `task/<task_id>`.")),
    ] = None,
    project_id: Annotated[
        str | None,
        Field(
            pattern=SCOPE_ID_PATTERN,
            description=("The project tier: items of `project/<project_id>`."),
        ),
    ] = None,
    include_global: Annotated[bool, Field(description="Include the global tier.")] = True,
    shares: Annotated[
        TierSharesIn | None,
        Field(
            description=(
                "Fractions of the budget per tier (default task 0.4, project 0.4, global 0.2)."
            )
        ),
    ] = None,
    head_tail: Annotated[
        int | None, Field(ge=0, le=1000, description=doc(ContextPackageCreate, "head_tail"))
    ] = None,
    filters: Filters = None,
) -> CallToolResult:
    call = call_of(ctx)
    fields: dict[str, Any] = {
        "budget_tokens": budget_tokens,
        "task_id": task_id,
        "project_id": project_id,
        "include_global": include_global,
        "head_tail": head_tail,
        "filters": filters or {},
    }
    if shares is not None:
        fields["shares"] = shares
    body = ContextPackageCreate.model_validate(fields)
    async with transaction(call.state.db_connection) as db:
        package = await packages.create_package(
            db,
            call.caller.tenant_id,
            body,
            max_candidates=int(call.state.settings.knowledge_max_candidates),
        )
    return ok(package)


TOOLS = (
    ToolSpec(
        knowledge_add_item,
        (
            "Store a piece of knowledge (a decision, fact, constraint...) in a tier: "
            "`task/<id>` while a task runs, `project/<id>` for what the project should keep, "
            "`global` for the whole tenant. Returns the item with its id and token cost."
        ),
        ToolAnnotations(read_only_hint=False, destructive_hint=False),
    ),
    ToolSpec(
        knowledge_query_items,
        (
            "Find knowledge items with filters (fields, lists for any-of, $gt/$gte/$lt/$lte/"
            "$ne operators), ordered and paged; e.g. every decision of project/checkout: "
            '{"scope": "project/checkout", "kind": "decision"}.'
        ),
        ToolAnnotations(read_only_hint=True),
    ),
    ToolSpec(
        knowledge_build_package,
        (
            "Build a context package: the most important items of a task, its project and "
            "the global tier that fit a token budget (split between the tiers), rendered as "
            "one text block ready to put in a prompt."
        ),
        ToolAnnotations(read_only_hint=True),
    ),
)

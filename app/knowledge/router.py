"""Knowledge tiers, context packages and the learned layer over HTTP."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Path, Query, Request, Response

from app.auth.deps import CallerDep, DbDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core.errors import ERROR_RESPONSES
from app.core.times import AS_OF_DOC, AsOf
from app.knowledge import examples, learned_service, packages, service
from app.knowledge.schemas import (
    ClearRequest,
    ClearResult,
    ContextPackageCreate,
    ContextPackagePublic,
    LearnedContent,
    LearnedPublic,
    LearnedRollback,
    MemoryItemCreate,
    MemoryItemList,
    MemoryItemPublic,
    MemoryItemQuery,
    PromoteRequest,
    TaskComplete,
    TaskCompleteResult,
)
from app.knowledge.scopes import SCOPE_ID_PATTERN
from app.state import app_state

router = APIRouter(tags=["knowledge"], responses=ERROR_RESPONSES)

TaskId = Annotated[str, Path(pattern=SCOPE_ID_PATTERN, max_length=128)]
AgentId = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


def _max_items(request: Request) -> int:
    return int(app_state(request.app).settings.knowledge_max_items)


@router.post(
    "/memory-items",
    status_code=201,
    response_model=MemoryItemPublic,
    summary="Store a knowledge item",
)
async def create_memory_item(
    body: Annotated[MemoryItemCreate, Body(openapi_examples=examples.ITEM)],
    request: Request,
    db: DbDep,
    caller: CallerDep,
    response: Response,
) -> MemoryItemPublic:
    """Store a task/project/global knowledge item (a project past max_items evicts 10%).
    Its ETag (its version) is what a `PATCH` names in If-Match."""
    conn = db
    item = await service.create_item(conn, caller, body, max_items=_max_items(request))
    response.headers["ETag"] = f'"{item.version}"'
    return service.to_public(item)


@router.post("/memory-items/query", response_model=MemoryItemList, summary="Query knowledge items")
async def query_memory_items(
    body: Annotated[MemoryItemQuery, Body(openapi_examples=examples.QUERY)],
    db: DbDep,
    caller: CallerDep,
    include_invalidated: bool = False,
    as_of: Annotated[
        AsOf | None,
        Query(
            description=(
                "The items true at this time (world time), each as it read then. " + AS_OF_DOC
            )
        ),
    ] = None,
) -> MemoryItemList:
    """Filter, order and page items (filters run in SQL; unknown fields/operators are 422).
    Facts superseded or forgotten are left out unless `include_invalidated=true`; with
    `as_of`, the items true at that time."""
    conn = db
    return await service.query_items(
        conn, caller, body, include_invalidated=include_invalidated, as_of=as_of
    )


@router.post("/memory-items/clear", response_model=ClearResult, summary="Clear a knowledge scope")
async def clear_memory_items(
    body: Annotated[ClearRequest, Body(openapi_examples=examples.CLEAR)],
    db: DbDep,
    caller: CallerDep,
) -> ClearResult:
    """Delete a scope's items (optionally only matching ones); `global` needs confirm: true."""
    conn = db
    return await service.clear_items(conn, caller, body)


@router.get(
    "/memory-items/{item_id:uuid}", response_model=MemoryItemPublic, summary="Get a knowledge item"
)
async def get_memory_item(
    item_id: uuid.UUID, db: DbDep, caller: CallerDep, response: Response
) -> MemoryItemPublic:
    """One item (its ETag: its version, for `PATCH`'s If-Match)."""
    conn = db
    item = await service.get_item(conn, caller, item_id)
    response.headers["ETag"] = f'"{item.version}"'
    return service.to_public(item)


@router.delete("/memory-items/{item_id:uuid}", status_code=204, summary="Delete a knowledge item")
async def delete_memory_item(item_id: uuid.UUID, db: DbDep, caller: CallerDep) -> Response:
    """Delete one item."""
    conn = db
    await service.delete_item(conn, caller, item_id)
    return Response(status_code=204)


@router.post(
    "/memory-items/{item_id:uuid}/promote",
    response_model=MemoryItemPublic,
    summary="Promote a knowledge item one tier up",
)
async def promote_memory_item(
    item_id: uuid.UUID,
    request: Request,
    db: DbDep,
    caller: CallerDep,
    body: Annotated[PromoteRequest | None, Body(openapi_examples=examples.PROMOTE)] = None,
) -> MemoryItemPublic:
    """Move an item one tier up: task -> project (needs project_id) -> global."""
    conn = db
    item = await service.promote_item(
        conn, caller, item_id, body.project_id if body else None, max_items=_max_items(request)
    )
    return service.to_public(item)


@router.post(
    "/tasks/{task_id}/complete",
    response_model=TaskCompleteResult,
    summary="Complete a task: keep some items, clear the rest",
)
async def complete_task(
    task_id: TaskId,
    request: Request,
    db: DbDep,
    caller: CallerDep,
    body: Annotated[TaskComplete | None, Body(openapi_examples=examples.TASK_COMPLETE)] = None,
) -> TaskCompleteResult:
    """Promote the listed task items to the project, then clear the task's memory."""
    conn = db
    return await service.complete_task(
        conn, caller, task_id, body or TaskComplete(), max_items=_max_items(request)
    )


@router.post(
    "/context-packages",
    response_model=ContextPackagePublic,
    summary="Build a context package from the knowledge tiers",
)
async def create_context_package(
    body: Annotated[ContextPackageCreate, Body(openapi_examples=examples.PACKAGE)],
    request: Request,
    db: DbDep,
    caller: CallerDep,
) -> ContextPackagePublic:
    """Items of the task, project and global tiers within budget_tokens (40/40/20 default)."""
    conn = db
    return await packages.create_package(
        conn,
        caller.tenant_id,
        body,
        max_candidates=int(app_state(request.app).settings.knowledge_max_candidates),
    )


@router.put(
    "/agents/{agent_id}/learned",
    response_model=LearnedPublic,
    summary="Store a new learned version",
)
async def put_learned(
    agent_id: AgentId,
    body: Annotated[LearnedContent, Body(openapi_examples=examples.LEARNED)],
    db: DbDep,
    caller: CallerDep,
) -> LearnedPublic:
    """Store a new learned version for the agent and make it active."""
    conn = db
    return await learned_service.put(conn, caller, agent_id, body)


@router.get(
    "/agents/{agent_id}/learned",
    response_model=LearnedPublic,
    summary="Get an agent's learned layer",
)
async def get_learned(
    agent_id: AgentId,
    db: DbDep,
    caller: CallerDep,
    version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> LearnedPublic:
    """The active learned version (or `version`)."""
    conn = db
    return await learned_service.get(conn, caller, agent_id, version)


@router.post(
    "/agents/{agent_id}/learned/rollback",
    response_model=LearnedPublic,
    summary="Roll the learned layer back to an earlier version",
)
async def rollback_learned(
    agent_id: AgentId,
    db: DbDep,
    caller: CallerDep,
    body: Annotated[LearnedRollback | None, Body(openapi_examples=examples.ROLLBACK)] = None,
) -> LearnedPublic:
    """Make an earlier version active (default: the one before the active version)."""
    conn = db
    return await learned_service.rollback(conn, caller, agent_id, body.to_version if body else None)

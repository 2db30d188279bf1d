"""`GET /v1/usage` (a tenant's LLM calls, grouped) and a tenant's daily token budget."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Body, Query, Request
from fastapi.openapi.models import Example

from app.auth.deps import CallerDep, DbDep, PrincipalDep
from app.core.db import read_only
from app.core.errors import ERROR_RESPONSES, BadRequest, Forbidden, NotFound
from app.llm.usage import meter_of
from app.state import app_state
from app.usage import repository as repo
from app.usage import service
from app.usage.schemas import BudgetPublic, BudgetSet, GroupBy, UsageGroup, UsageReport

BUDGET_EXAMPLES: dict[str, Example] = {
    "two_million": Example(
        summary="Two million tokens a day",
        value={"daily_tokens": 2_000_000},
    ),
    "none": Example(summary="No budget for this tenant", value={"daily_tokens": None}),
}

router = APIRouter(tags=["usage"], responses=ERROR_RESPONSES)

DEFAULT_DAYS = 30
MAX_DAYS = 400


def _group(row: repo.GroupRow) -> UsageGroup:
    calls = int(row.calls)
    return UsageGroup(
        key=None if row.key is None else str(row.key),
        calls=calls,
        input_tokens=int(row.input_tokens),
        output_tokens=int(row.output_tokens),
        total_tokens=int(row.input_tokens) + int(row.output_tokens),
        failed_calls=int(row.failed),
        avg_latency_ms=int(row.latency_ms) // calls if calls else 0,
    )


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@router.get("/usage", response_model=UsageReport, summary="LLM usage and cost")
async def get_usage(
    request: Request,
    db: DbDep,
    caller: CallerDep,
    group_by: GroupBy = "day",
    since: Annotated[
        datetime | None, Query(description="Start (inclusive); default 30 days ago, 00:00 UTC.")
    ] = None,
    until: Annotated[datetime | None, Query(description="End (exclusive); default now.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> UsageReport:
    """Every LLM call the service made for the tenant (summaries, fact recording and
    decisions, rerank), with its tokens, over a range of at most 400 days, grouped by UTC
    day, purpose, model, session, user or agent; with the daily token budget and today's
    spending. Agent keys see their own agent's calls. Admin keys name the tenant with
    X-Tenant-Id."""
    now = datetime.now(UTC)
    end = _utc(until) if until is not None else now + timedelta(seconds=1)
    start = (
        _utc(since)
        if since is not None
        else (now - timedelta(days=DEFAULT_DAYS)).replace(hour=0, minute=0, second=0, microsecond=0)
    )
    if start >= end:
        raise BadRequest("`since` must be before `until`.", code="invalid_range")
    if end - start > timedelta(days=MAX_DAYS):
        raise BadRequest(f"A range spans at most {MAX_DAYS} days.", code="invalid_range")
    state = app_state(request.app)
    meter = meter_of(state.llm)
    if meter is not None:
        await meter.flush()  # this process's calls of the last half second count too
    agent = caller.agent_id if caller.role == "agent" else None
    conn = db
    rows = await repo.report(conn, caller.tenant_id, group_by, start, end, limit + 1, agent)
    [total] = await repo.report(conn, caller.tenant_id, "total", start, end, 1, agent)
    return UsageReport(
        group_by=group_by,
        since=start,
        until=end,
        items=[_group(r) for r in rows[:limit]],
        total=_group(total),
        truncated=len(rows) > limit,
        budget=await service.budget_of(conn, state.settings, caller.tenant_id),
    )


def _admin_tenant(principal: Any, tenant_id: uuid.UUID, *, write: bool) -> None:
    if principal.role == "admin":
        return
    if write or principal.tenant_id != tenant_id:
        raise Forbidden("Only admin keys set a tenant's budget." if write else "Not your tenant.")


async def _existing(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> None:
    if not await repo.tenant_exists(conn, tenant_id):
        raise NotFound("No such tenant.", code="tenant_not_found")


@router.get(
    "/tenants/{tenant_id}/budget",
    response_model=BudgetPublic,
    summary="Get a tenant's daily token budget",
    tags=["admin"],
)
async def get_budget(
    tenant_id: uuid.UUID, request: Request, db: DbDep, principal: PrincipalDep
) -> BudgetPublic:
    """The budget in force (the tenant's own, else LOOM_DAILY_TOKEN_BUDGET) and today's
    spending. Admin keys, or a key of the tenant."""
    _admin_tenant(principal, tenant_id, write=False)
    conn = db
    await _existing(conn, tenant_id)
    return await service.budget_of(conn, app_state(request.app).settings, tenant_id)


async def _changed(
    request: Request, conn: asyncpg.Connection, tenant_id: uuid.UUID
) -> BudgetPublic:
    """After the change (committed: other processes read it; the route runs in
    autocommit), the budget read and the waiting extractions resumed."""
    state = app_state(request.app)
    meter = meter_of(state.llm)
    if meter is not None:
        meter.forget(tenant_id)
    budget = await service.budget_of(conn, state.settings, tenant_id)
    if not budget.spent:  # room again: the extractions that waited go on now
        await service.resume_waiting(state.queue, conn, tenant_id)
    return budget


@router.put(
    "/tenants/{tenant_id}/budget",
    response_model=BudgetPublic,
    summary="Set a tenant's daily token budget",
    tags=["admin"],
)
@read_only  # its change commits in a transaction of its own, before the read (`_changed`)
async def set_budget(
    tenant_id: uuid.UUID,
    body: Annotated[BudgetSet, Body(openapi_examples=BUDGET_EXAMPLES)],
    request: Request,
    db: DbDep,
    principal: PrincipalDep,
) -> BudgetPublic:
    """Set the tenant's own budget (admin). Past it, LLM work degrades instead of
    spending: heuristic summaries, fact extraction waits, no rerank. Raising it resumes
    the waiting extractions at once (other processes see it within
    LOOM_USAGE_BUDGET_REFRESH_SECONDS)."""
    _admin_tenant(principal, tenant_id, write=True)
    async with db.transaction():
        await _existing(db, tenant_id)
        await repo.set_budget(db, tenant_id, body.daily_tokens)
    return await _changed(request, db, tenant_id)


@router.delete(
    "/tenants/{tenant_id}/budget",
    response_model=BudgetPublic,
    summary="Reset a tenant's daily token budget to the default",
    tags=["admin"],
)
@read_only  # as `set_budget`
async def reset_budget(
    tenant_id: uuid.UUID, request: Request, db: DbDep, principal: PrincipalDep
) -> BudgetPublic:
    """Drop the tenant's own budget: LOOM_DAILY_TOKEN_BUDGET applies again (admin)."""
    _admin_tenant(principal, tenant_id, write=True)
    async with db.transaction():
        await _existing(db, tenant_id)
        await repo.clear_budget(db, tenant_id)
    return await _changed(request, db, tenant_id)

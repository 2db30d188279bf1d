"""The tenant's background jobs (compression, fact extraction) and the queue's state."""

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request

from app.auth.deps import CallerDep, DbDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core.db import read_only
from app.core.errors import ERROR_RESPONSES
from app.core.pagination import CursorQuery, decode_cursor, fetch_limit, invalid_cursor, page
from app.core.queue import queue_health
from app.jobs import repository
from app.jobs.schemas import JobKind, JobList, JobListed, ListedStatus, QueueStatus
from app.state import app_state

router = APIRouter(tags=["jobs"], responses=ERROR_RESPONSES)


async def queue_status(request: Request) -> QueueStatus | None:
    """Depth of the arq queue and the workers' latest health report (None while Redis does
    not answer: the jobs themselves are read from PostgreSQL)."""
    state = app_state(request.app)
    health = await queue_health(state.redis, state.settings.queue_name)
    if health is None:
        return None
    return QueueStatus(
        depth=health.depth,
        worker_alive=health.worker_report is not None,
        worker_report=health.worker_report,
    )


@router.get("/jobs", response_model=JobList, summary="List background jobs")
@read_only
async def list_jobs(
    request: Request,
    db: DbDep,
    caller: CallerDep,
    kind: JobKind | None = None,
    status: ListedStatus | None = None,
    agent_id: Annotated[str | None, Query(pattern=AGENT_ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: CursorQuery = None,
) -> JobList:
    """Each session's latest compression job and fact extraction, most recently changed
    first, filtered by kind, status and agent. Agent keys see their own agent's sessions
    only, and no queue; service and admin keys also get the queue's depth and whether a
    worker reported lately."""
    if caller.role == "agent":
        caller.require_agent_access(agent_id)
        agent_id = caller.agent_id
    after = None
    data = decode_cursor(cursor, {"t": str, "s": str, "k": str})
    if data is not None:
        try:
            after = (datetime.fromisoformat(data["t"]), uuid.UUID(data["s"]), data["k"])
        except ValueError as exc:
            raise invalid_cursor() from exc
    rows = await repository.list_jobs(
        db,
        caller.tenant_id,
        kind=kind,
        status=status,
        agent_id=agent_id,
        after=after,
        limit=fetch_limit(limit),
    )
    shown, nxt = page(
        rows, limit, lambda r: {"t": r.updated_at.isoformat(), "s": str(r.session_id), "k": r.kind}
    )
    return JobList(
        items=[
            JobListed(
                kind=r.kind,
                session_id=str(r.session_id),
                agent_id=r.agent_id,
                status=r.status,
                attempts=r.attempts,
                last_error=r.last_error,
                enqueued_at=r.enqueued_at,
                started_at=r.started_at,
                finished_at=r.finished_at,
                updated_at=r.updated_at,
            )
            for r in shown
        ],
        next_cursor=nxt,
        queue=None if caller.role == "agent" else await queue_status(request),
    )

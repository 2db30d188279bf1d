"""Users: the people a tenant's sessions are with (issue 28)."""

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from app.auth.deps import CallerDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core.db import DbDep, read_only
from app.core.errors import ERROR_RESPONSES
from app.core.pagination import CursorQuery, decode_cursor, fetch_limit, page
from app.erasure import service as erasure_service
from app.erasure.router import answer
from app.erasure.schemas import ErasurePublic
from app.state import app_state
from app.users import access, repository
from app.users.schemas import UserList, UserPublic

router = APIRouter(tags=["users"], responses=ERROR_RESPONSES)
UserPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


def _public(row: object, fact_count: int | None = None) -> UserPublic:
    return UserPublic(
        id=row.user_id,  # type: ignore[attr-defined]
        session_count=row.session_count,  # type: ignore[attr-defined]
        message_count=row.message_count,  # type: ignore[attr-defined]
        first_seen=row.first_seen,  # type: ignore[attr-defined]
        last_activity=row.last_activity,  # type: ignore[attr-defined]
        fact_count=fact_count,
    )


def _own_agent(caller: object) -> str | None:
    """Agent keys: the user rule and the session rule at once — only their own agent's
    sessions, hence only users that agent has a session with."""
    return caller.agent_id if caller.role == "agent" else None  # type: ignore[attr-defined]


@router.get("/users", response_model=UserList, summary="List users")
@read_only
async def list_users(
    db: DbDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: CursorQuery = None,
) -> UserList:
    """The tenant's users (every `user_id` sessions were created with), by id, with their
    session count and last activity. Agent keys list the users their agent has sessions
    with, counting those sessions only."""
    data = decode_cursor(cursor, {"u": str})
    rows = await repository.list_page(
        db,
        caller.tenant_id,
        agent_id=_own_agent(caller),
        after=data["u"] if data else None,
        limit=fetch_limit(limit),
    )
    shown, nxt = page(rows, limit, lambda r: {"u": r.user_id})
    return UserList(items=[_public(r) for r in shown], next_cursor=nxt)


@router.get("/users/{user_id}", response_model=UserPublic, summary="Get a user")
@read_only
async def get_user(user_id: UserPath, db: DbDep, caller: CallerDep) -> UserPublic:
    """One user: sessions, messages, last activity and the size of their facts tier.
    404 `user_not_found` for a user the caller may not see, or with nothing stored."""
    await access.require_visible(db, caller, user_id)
    row = await repository.summary(db, caller.tenant_id, user_id, agent_id=_own_agent(caller))
    facts = await repository.fact_count(db, caller.tenant_id, user_id)
    if row is None:
        if not facts:
            raise access.UserNotFound()
        return UserPublic(
            id=user_id,
            session_count=0,
            message_count=0,
            first_seen=None,
            last_activity=None,
            fact_count=facts,
        )
    return _public(row, facts)


@router.delete(
    "/users/{user_id}",
    response_model=ErasurePublic,
    status_code=200,
    responses={202: {"model": ErasurePublic, "description": "Erasure running"}},
    summary="Erase a user",
)
async def erase_user(
    user_id: UserPath, caller: CallerDep, request: Request, response: Response
) -> ErasurePublic:
    """Erase everything about this person: their sessions with every message, summary,
    snapshot, memory state, search statistics, idempotency record, job row and queued
    job, the facts drawn from those sessions and the `user/<id>` tier with every version,
    the sessions' shared-memory entries with their references and offloaded tool results,
    and the copies API processes cache. From this call on the user reads as deleted; the
    rows go in batches. Answers the receipt: 200 when done, 202 while a worker finishes
    (`GET /v1/erasures/{id}`). Service and admin keys (an agent key: 403, or 404 for a
    user it may not see)."""
    state = app_state(request.app)
    row = await erasure_service.erase_user(state, caller, user_id)
    return answer(erasure_service.to_public(row), response)

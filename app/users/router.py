"""Users: the people a tenant's sessions are with."""

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.auth.caller import Caller
from app.auth.deps import CallerDep, DbDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core.db import read_only
from app.core.errors import ERROR_RESPONSES
from app.core.pagination import CursorQuery, decode_cursor, fetch_limit, page
from app.users import access, repository
from app.users.repository import UserRow
from app.users.schemas import UserList, UserPublic

router = APIRouter(tags=["users"], responses=ERROR_RESPONSES)
UserPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


def _public(row: UserRow, fact_count: int | None = None) -> UserPublic:
    return UserPublic(
        id=row.user_id,
        session_count=row.session_count,
        message_count=row.message_count,
        first_seen=row.first_seen,
        last_activity=row.last_activity,
        fact_count=fact_count,
    )


def _own_agent(caller: Caller) -> str | None:
    """Agent keys: the user rule and the session rule at once — only their own agent's
    sessions, hence only users that agent has a session with."""
    return caller.agent_id if caller.role == "agent" else None


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
    conn = db
    row = await repository.summary(conn, caller.tenant_id, user_id, agent_id=_own_agent(caller))
    facts = await repository.fact_count(conn, caller.tenant_id, user_id)
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

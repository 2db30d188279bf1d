"""Load-or-404 for the `{session_id}` path parameter."""

import uuid
from typing import Annotated

from fastapi import Depends

from app.auth.deps import CallerDep
from app.core.db import DbDep
from app.core.errors import NotFound
from app.models import Session
from app.sessions import repository


async def get_session_row(session_id: uuid.UUID, db: DbDep, caller: CallerDep) -> Session:
    """The caller's session or 404 (another tenant's or another agent's looks missing)."""
    session = await repository.get(db, caller.tenant_id, session_id)
    if session is None or not caller.can_see_agent(session.agent_id):
        raise NotFound("No such session.", code="session_not_found")
    return session


SessionDep = Annotated[Session, Depends(get_session_row)]

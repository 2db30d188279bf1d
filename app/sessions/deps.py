"""Load-or-404 for the `{session_id}` path parameter."""

import uuid
from typing import Annotated

from fastapi import Depends

from app.auth.deps import CallerDep
from app.core.db import DbDep
from app.models import Session
from app.sessions import repository
from app.sessions.access import visible_session


async def get_session_row(session_id: uuid.UUID, db: DbDep, caller: CallerDep) -> Session:
    """The caller's session or 404 (another tenant's or another agent's looks missing)."""
    return visible_session(caller, await repository.get(db, caller.tenant_id, session_id))


SessionDep = Annotated[Session, Depends(get_session_row)]

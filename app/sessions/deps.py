"""Load-or-404 for the `{session_id}` path parameter."""

import uuid
from typing import Annotated

from fastapi import Depends

from app.auth.deps import CallerDep, DbDep
from app.models.session import SessionRow
from app.sessions import repository
from app.sessions.access import visible_session


async def get_session_row(session_id: uuid.UUID, db: DbDep, caller: CallerDep) -> SessionRow:
    """The caller's session or 404 (another tenant's or another agent's looks missing), read
    on the connection under the request's session (in its transaction)."""
    conn = db
    return visible_session(caller, await repository.get(conn, caller.tenant_id, session_id))


SessionDep = Annotated[SessionRow, Depends(get_session_row)]

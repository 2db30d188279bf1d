"""Who may see a session: one rule and one lookup for every entrance.

Rule (SPEC §3, Visibility): a session is visible to its own agent (an `agent` key bound to
that agent id) and to the `service` and `admin` keys of its tenant. To anyone else it does
not exist: 404 `session_not_found`, exactly as for an unknown id, so a caller cannot even
learn that the id is taken.

Everything that carries a session id asks this module, never its own query:
- the `/v1/sessions/{id}/...` routes (through `app.sessions.deps.SessionDep`),
- the `session` shared-memory namespace (REST CRUD, list, `?ref=true`, the SSE watch and
  the `shared_memory_*` built-in tools), whose `scope_id` is a session id,
- data references (`GET /v1/refs/{id}`) of entries in a session's scope, offloaded tool
  results included.

A session under erasure (its tombstone `erasure_id` set, app.erasure) is deleted for every
reader from the moment the erasure is asked for.

The pure part is `Caller.can_see_agent`; `_AGENT_SQL` below is the only query, run on an
asyncpg connection (`*_pg`; `visible_agent` and `require_visible` also take a SQLAlchemy
session, for the callers still holding one: transitional).
"""

import uuid

import asyncpg

from app.auth.caller import Caller
from app.core.errors import NotFound
from app.models.session import SessionRow


class SessionNotFound(NotFound):
    code = "session_not_found"

    def __init__(self) -> None:
        super().__init__("No such session.")


def parse_session_id(value: str | uuid.UUID) -> uuid.UUID | None:
    """A session id from a path or `scope_id`, or None when it cannot be one."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return None


# the one query of the rule, on the asyncpg connection every caller has (either pool's)
_AGENT_SQL = "SELECT agent_id FROM sessions WHERE tenant_id = $1 AND id = $2 AND erasure_id IS NULL"


async def visible_agent_pg(
    conn: asyncpg.Connection, caller: Caller, session_id: uuid.UUID
) -> str | None:
    """The agent id of `session_id` if `caller` may see that session, else None."""
    agent_id = await conn.fetchval(_AGENT_SQL, caller.tenant_id, session_id)
    if agent_id is None or not caller.can_see_agent(agent_id):
        return None
    return str(agent_id)


async def require_visible_pg(
    conn: asyncpg.Connection, caller: Caller, session_id: uuid.UUID
) -> str:
    """The session's agent id; 404 `session_not_found` if the caller may not see it."""
    agent_id = await visible_agent_pg(conn, caller, session_id)
    if agent_id is None:
        raise SessionNotFound()
    return agent_id


# the names the other domains call (one query: `_VISIBLE_AGENT_SQL`)
visible_agent = visible_agent_pg
require_visible = require_visible_pg


def visible_session(caller: Caller, session: SessionRow | None) -> SessionRow:
    """`session` if it is the caller's to see (already filtered by tenant), else 404."""
    if (
        session is None
        or session.tenant_id != caller.tenant_id
        or not caller.can_see_agent(session.agent_id)
    ):
        raise SessionNotFound()
    return session

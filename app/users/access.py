"""Who may see a user: one rule, written once, for every entrance.

Rule (a decision where the spec was silent on details): a user of a tenant — their
sessions' list entry, `GET /v1/users/{id}`, the `user/<user_id>` knowledge tier, search
with `scope: "user"`, export — is visible to
- the `service` and `admin` keys of that tenant, and
- an `agent` key whose agent has a (not erased) session with that user;
to anyone else the user does not exist: 404 `user_not_found`, exactly as for an unknown
id. An agent key that sees a user still sees only its own agent's sessions of that user
(the session rule, `app.sessions.access`).

`sees_every_user` is the pure part; the agent-key side is one condition, written as SQL
(`knows_user_sql`, over a bind or a column holding user ids) for the knowledge tier's
`readable_sql` (the `user/<id>` tier) and for `may_see` below. The users list keeps an
agent key to its own agent's sessions, which is the same rule.
"""

from __future__ import annotations

import asyncpg

from app.auth.caller import Caller
from app.core.errors import NotFound


class UserNotFound(NotFound):
    code = "user_not_found"

    def __init__(self) -> None:
        super().__init__("No such user.")


def sees_every_user(role: str) -> bool:
    """Service and admin keys see every user of their tenant; agent keys only some."""
    return role != "agent"


def knows_user_sql(tenant: str, agent: str | None, user: str) -> str:
    """The agent has a live session with the user: `tenant`, `agent` and `user` are bind
    names (`:x`) or column references, as a statement composed with `app.core.pg.Params`
    writes them."""
    if agent is None:
        return "false"
    return (
        f"EXISTS (SELECT 1 FROM sessions ks WHERE ks.tenant_id = {tenant} AND ks.agent_id = "
        f"{agent} AND ks.user_id = {user} AND ks.erasure_id IS NULL)"
    )


# `knows_user_sql` for one user
_KNOWS_SQL = """
SELECT EXISTS (SELECT 1 FROM sessions WHERE tenant_id = $1 AND agent_id = $2
               AND user_id = $3 AND erasure_id IS NULL)
"""


async def may_see(conn: asyncpg.Connection, caller: Caller, user_id: str) -> bool:
    """Whether `caller` may see user `user_id` (the user need not have sessions: a service
    key may, e.g., write facts about a user before their first session). `handle`: the
    connection, or (erasure, search, portability, until they pass theirs) a session."""
    if sees_every_user(caller.role):
        return True
    if caller.agent_id is None:
        return False
    return bool(await conn.fetchval(_KNOWS_SQL, caller.tenant_id, caller.agent_id, user_id))


async def require_visible(conn: asyncpg.Connection, caller: Caller, user_id: str) -> None:
    """404 `user_not_found` unless `caller` may see the user."""
    if not await may_see(conn, caller, user_id):
        raise UserNotFound()

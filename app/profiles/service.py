"""Agent profiles: versioned ROM sources. Publishing a version is the hot-reload: new
sessions freeze it, existing sessions keep the ROM they started with."""

import asyncpg

from app.auth.caller import Caller
from app.core.errors import Conflict, NotFound
from app.knowledge.schemas import FactsInput
from app.models.agent_profile import ProfileRow
from app.models.base import new_id
from app.profiles import repository
from app.profiles.schemas import ProfilePublic, ProfileUpdate


def check_agent(caller: Caller, agent_id: str) -> None:
    caller.require_agent_access(agent_id)


def to_public(p: ProfileRow) -> ProfilePublic:
    return ProfilePublic(
        agent_id=p.agent_id,
        version=p.version,
        system_prompt=p.system_prompt,
        patterns=p.patterns,
        backend_schema=p.backend_schema,
        facts=FactsInput.model_validate(p.facts) if p.facts else None,
        audit=p.audit,
        created_at=p.created_at,
    )


async def publish(
    conn: asyncpg.Connection, caller: Caller, agent_id: str, body: ProfileUpdate
) -> ProfileRow:
    """Store the next version (a concurrent publish of the same version is a 409)."""
    check_agent(caller, agent_id)
    current = await repository.latest(conn, caller.tenant_id, agent_id)
    profile = await repository.publish(
        conn,
        profile_id=new_id(),
        tenant_id=caller.tenant_id,
        agent_id=agent_id,
        version=(current.version if current else 0) + 1,
        system_prompt=body.system_prompt,
        patterns=body.patterns,
        backend_schema=body.backend_schema,
        facts=body.facts.model_dump() if body.facts else None,
        audit=body.audit,
    )
    if profile is None:
        raise Conflict(
            "Another version was published at the same time; retry.",
            code="profile_version_conflict",
        )
    return profile


async def get(
    conn: asyncpg.Connection, caller: Caller, agent_id: str, version: int | None
) -> ProfileRow:
    check_agent(caller, agent_id)
    if version is None:
        found = await repository.latest(conn, caller.tenant_id, agent_id)
    else:
        found = await repository.by_version(conn, caller.tenant_id, agent_id, version)
    if found is None:
        raise NotFound("This agent has no such profile.", code="profile_not_found")
    return found

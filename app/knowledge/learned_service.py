"""Learned layer: versioned DSPy-style artifacts per agent, with rollback.

Access: agent keys manage only their own agent (another agent's path is 403
``agent_mismatch``, as for sessions created for another agent); service and
admin keys manage every agent of the tenant.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg

from app.auth.caller import Caller
from app.core.errors import Conflict, NotFound
from app.knowledge import repository
from app.knowledge.learned import LearnedError, rollback_target
from app.knowledge.schemas import LearnedContent, LearnedPublic
from app.models.learned import LearnedHeadRow, LearnedVersionRow


def check_agent(caller: Caller, agent_id: str) -> None:
    caller.require_agent_access(agent_id)


def to_public(row: LearnedVersionRow, head: LearnedHeadRow) -> LearnedPublic:
    content = LearnedContent.model_validate(row.content)
    return LearnedPublic(
        **content.model_dump(),
        agent_id=row.agent_id,
        version=row.version,
        active_version=head.active_version,
        latest_version=head.latest_version,
        created_at=row.created_at,
    )


async def put(
    conn: asyncpg.Connection, caller: Caller, agent_id: str, body: LearnedContent
) -> LearnedPublic:
    """Store a new version and make it active."""
    check_agent(caller, agent_id)
    head = await repository.allocate_learned_version(conn, caller.tenant_id, agent_id)
    row = await repository.add_learned_version(
        conn,
        LearnedVersionRow(
            id=uuid.uuid4(),
            tenant_id=caller.tenant_id,
            agent_id=agent_id,
            version=head.latest_version,
            content=body.model_dump(),
            created_at=datetime.now(UTC),
        ),
    )
    return to_public(row, head)


async def get(
    conn: asyncpg.Connection, caller: Caller, agent_id: str, version: int | None = None
) -> LearnedPublic:
    """The active version, or a given one."""
    check_agent(caller, agent_id)
    head = await repository.get_learned_head(conn, caller.tenant_id, agent_id)
    if head is None:
        raise NotFound("This agent has no learned artifacts.", code="learned_not_found")
    row = await repository.get_learned_version(
        conn, caller.tenant_id, agent_id, version or head.active_version
    )
    if row is None:
        raise NotFound(f"No learned version {version}.", code="learned_version_not_found")
    return to_public(row, head)


async def rollback(
    conn: asyncpg.Connection, caller: Caller, agent_id: str, to_version: int | None
) -> LearnedPublic:
    """Make an earlier version active (the previous one by default)."""
    check_agent(caller, agent_id)
    head = await repository.get_learned_head(conn, caller.tenant_id, agent_id, for_update=True)
    if head is None:
        raise NotFound("This agent has no learned artifacts.", code="learned_not_found")
    versions = await repository.learned_version_numbers(conn, caller.tenant_id, agent_id)
    try:
        target = rollback_target(versions, head.active_version, to_version)
    except LearnedError as exc:
        if to_version is not None and to_version not in versions:
            raise NotFound(str(exc), code="learned_version_not_found") from exc
        raise Conflict(str(exc), code="cannot_rollback") from exc
    moved = await repository.activate_learned_version(
        conn, caller.tenant_id, agent_id, target, datetime.now(UTC)
    )
    assert moved is not None  # its row is locked
    row = await repository.get_learned_version(conn, caller.tenant_id, agent_id, target)
    assert row is not None
    return to_public(row, moved)

"""User queries: a user is the set of (live) sessions with one `user_id`, plus their tier
of facts. Every query names its tenant."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Session
from app.models.base import table_of
from app.models.memory_item import MemoryItem

_S = table_of(Session).c
_M = table_of(MemoryItem).c


def _summary(tenant_id: uuid.UUID, agent_id: str | None) -> sa.Select[Any]:
    q = (
        sa.select(
            _S.user_id,
            sa.func.count().label("session_count"),
            sa.func.coalesce(sa.func.sum(_S.last_seq), 0).label("message_count"),
            sa.func.min(_S.created_at).label("first_seen"),
            sa.func.max(_S.updated_at).label("last_activity"),
        )
        .where(_S.tenant_id == tenant_id, _S.user_id.is_not(None), _S.erasure_id.is_(None))
        .group_by(_S.user_id)
    )
    if agent_id is not None:
        q = q.where(_S.agent_id == agent_id)
    return q


async def list_page(
    db: AsyncSession, tenant_id: uuid.UUID, *, agent_id: str | None, after: str | None, limit: int
) -> list[Any]:
    """Users by id; `agent_id`: only that agent's sessions (and so only its users)."""
    q = _summary(tenant_id, agent_id)
    if after is not None:
        q = q.where(_S.user_id > after)
    return list((await db.execute(q.order_by(_S.user_id).limit(limit))).all())


async def summary(
    db: AsyncSession, tenant_id: uuid.UUID, user_id: str, *, agent_id: str | None
) -> Any:
    """One user's row (None when they have no live session the filter keeps)."""
    q = _summary(tenant_id, agent_id).where(_S.user_id == user_id)
    return (await db.execute(q)).first()


async def fact_count(db: AsyncSession, tenant_id: uuid.UUID, user_id: str) -> int:
    return int(
        await db.scalar(
            sa.select(sa.func.count())
            .select_from(table_of(MemoryItem))
            .where(_M.tenant_id == tenant_id, _M.scope_kind == "user", _M.scope_id == user_id)
        )
        or 0
    )


async def session_ids(
    db: AsyncSession, tenant_id: uuid.UUID, user_id: str, *, agent_id: str | None = None
) -> list[uuid.UUID]:
    q = sa.select(_S.id).where(
        _S.tenant_id == tenant_id, _S.user_id == user_id, _S.erasure_id.is_(None)
    )
    if agent_id is not None:
        q = q.where(_S.agent_id == agent_id)
    return list((await db.execute(q.order_by(_S.created_at, _S.id))).scalars())

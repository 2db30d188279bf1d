"""Session queries. Every one filters by tenant, and leaves out sessions under erasure
(their tombstone, `erasure_id`, makes them read as deleted: app.erasure)."""

import uuid
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from app.models import Session


async def get(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> Session | None:
    result = await db.execute(
        sa.select(Session).where(
            col(Session.tenant_id) == tenant_id,
            col(Session.id) == session_id,
            col(Session.erasure_id).is_(None),
        )
    )
    return result.scalar_one_or_none()


async def add(db: AsyncSession, session: Session) -> Session:
    db.add(session)
    await db.flush()
    return session


async def list_page(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    agent_id: str | None,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
    user_id: str | None = None,
) -> list[Session]:
    q = sa.select(Session).where(
        col(Session.tenant_id) == tenant_id, col(Session.erasure_id).is_(None)
    )
    if agent_id is not None:
        q = q.where(col(Session.agent_id) == agent_id)
    if user_id is not None:
        q = q.where(col(Session.user_id) == user_id)
    if after is not None:
        q = q.where(sa.tuple_(col(Session.created_at), col(Session.id)) > sa.tuple_(*after))
    result = await db.execute(q.order_by(col(Session.created_at), col(Session.id)).limit(limit))
    return list(result.scalars())


async def delete(db: AsyncSession, session: Session) -> None:
    await db.delete(session)
    await db.flush()

"""Agent profile queries (tenant-filtered)."""

import uuid

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from app.models.agent_profile import AgentProfile


async def latest(db: AsyncSession, tenant_id: uuid.UUID, agent_id: str) -> AgentProfile | None:
    q = (
        sa.select(AgentProfile)
        .where(col(AgentProfile.tenant_id) == tenant_id, col(AgentProfile.agent_id) == agent_id)
        .order_by(col(AgentProfile.version).desc())
        .limit(1)
    )
    return (await db.execute(q)).scalar_one_or_none()


async def by_version(
    db: AsyncSession, tenant_id: uuid.UUID, agent_id: str, version: int
) -> AgentProfile | None:
    q = sa.select(AgentProfile).where(
        col(AgentProfile.tenant_id) == tenant_id,
        col(AgentProfile.agent_id) == agent_id,
        col(AgentProfile.version) == version,
    )
    return (await db.execute(q)).scalar_one_or_none()


async def add(db: AsyncSession, profile: AgentProfile) -> None:
    db.add(profile)
    await db.flush()

"""Queries for tenants and API keys."""

import uuid
from datetime import UTC, datetime

import asyncpg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from app.models import ApiKey, Tenant

# Every request resolves its key: on the hot paths' asyncpg pool (`app.core.pg`), as a
# prepared statement, when the per-process key cache does not have it.
_KEY_BY_HASH = """
SELECT id, role, tenant_id, agent_id, revoked_at IS NOT NULL AS revoked
FROM api_keys WHERE key_hash = $1
"""
_TENANT_EXISTS = "SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)"


async def key_by_hash(conn: asyncpg.Connection, key_hash: str) -> asyncpg.Record | None:
    """(id, role, tenant_id, agent_id, revoked) of the key with this hash."""
    return await conn.fetchrow(_KEY_BY_HASH, key_hash)


async def tenant_exists(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> bool:
    return bool(await conn.fetchval(_TENANT_EXISTS, tenant_id))


async def get_tenant(db: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    return await db.get(Tenant, tenant_id)


async def get_tenant_by_name(db: AsyncSession, name: str) -> Tenant | None:
    result = await db.execute(sa.select(Tenant).where(col(Tenant.name) == name))
    return result.scalar_one_or_none()


async def add_tenant(db: AsyncSession, tenant: Tenant) -> Tenant:
    db.add(tenant)
    await db.flush()
    return tenant


async def add_key(db: AsyncSession, key: ApiKey) -> ApiKey:
    db.add(key)
    await db.flush()
    return key


async def list_keys(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    after: uuid.UUID | None,
    limit: int,
    role: str | None = None,
) -> list[ApiKey]:
    q = sa.select(ApiKey).where(col(ApiKey.tenant_id) == tenant_id)
    if role:
        q = q.where(col(ApiKey.role) == role)
    if after:
        q = q.where(col(ApiKey.id) > after)
    result = await db.execute(q.order_by(col(ApiKey.id)).limit(limit))
    return list(result.scalars())


async def get_key(db: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey | None:
    result = await db.execute(
        sa.select(ApiKey).where(col(ApiKey.tenant_id) == tenant_id, col(ApiKey.id) == key_id)
    )
    return result.scalar_one_or_none()


async def revoke_key(db: AsyncSession, key: ApiKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = datetime.now(UTC)
        await db.flush()

"""Tenants and API keys: who may create, list and revoke what."""

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import repository
from app.auth.deps import Principal
from app.auth.keys import display_prefix, generate_key, hash_key
from app.auth.schemas import ApiKeyCreate, TenantCreate
from app.core.errors import Forbidden, NotFound
from app.models import ApiKey, Tenant


async def create_tenant(db: AsyncSession, body: TenantCreate) -> Tenant:
    tenant_id = uuid.uuid4()
    tenant = Tenant(id=tenant_id, tenant_id=tenant_id, name=body.name,
                    text_search_config=body.text_search_config)
    return await repository.add_tenant(db, tenant)


def _target_tenant(principal: Principal, requested: uuid.UUID | None) -> uuid.UUID:
    """Admins may name any tenant; a service key manages only its own tenant."""
    if principal.role == "admin":
        target = requested or principal.tenant_id
        if target is None:
            raise NotFound("Name the tenant with tenant_id.")
        return target
    if principal.role != "service":
        raise Forbidden("Agent keys cannot manage keys.")
    if requested is not None and requested != principal.tenant_id:
        raise NotFound("No such tenant.")
    assert principal.tenant_id is not None
    return principal.tenant_id


async def create_key(db: AsyncSession, principal: Principal,
                     body: ApiKeyCreate) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret (which is never stored or shown again).

    Decision: service keys may mint `agent` keys for their own tenant, so an agent runtime
    can hand each of its agents a key bound to it; only admins create admin/service keys.
    """
    tenant_id = _target_tenant(principal, body.tenant_id)
    if principal.role == "service" and body.role != "agent":
        raise Forbidden("Service keys may only create agent keys.")
    if await repository.get_tenant(db, tenant_id) is None:
        raise NotFound("No such tenant.")
    secret = generate_key()
    key = ApiKey(tenant_id=tenant_id, name=body.name, role=body.role, agent_id=body.agent_id,
                 key_hash=hash_key(secret), prefix=display_prefix(secret))
    await repository.add_key(db, key)
    return key, secret


async def list_keys(db: AsyncSession, principal: Principal, tenant_id: uuid.UUID | None, *,
                    after: uuid.UUID | None, limit: int) -> list[ApiKey]:
    target = _target_tenant(principal, tenant_id)
    role = "agent" if principal.role == "service" else None
    return await repository.list_keys(db, target, after=after, limit=limit, role=role)


async def revoke_key(db: AsyncSession, principal: Principal, tenant_id: uuid.UUID | None,
                     key_id: uuid.UUID) -> ApiKey:
    target = _target_tenant(principal, tenant_id)
    key = await repository.get_key(db, target, key_id)
    if key is None or (principal.role == "service" and key.role != "agent"):
        raise NotFound("No such API key.")
    await repository.revoke_key(db, key)
    return key

"""Tenants and API keys: who may create, list and revoke what.

The functions take the asyncpg connection of the route (`app.auth.deps.DbDep`) or of the
CLI, and run the repository's SQL in its transaction."""

import uuid
from datetime import UTC, datetime

import asyncpg

from app.auth import repository
from app.auth.deps import Principal
from app.auth.keys import display_prefix, generate_key, hash_key
from app.auth.schemas import ApiKeyCreate, TenantCreate
from app.core.errors import Conflict, Forbidden, NotFound
from app.models.api_key import ApiKeyRow
from app.models.base import new_id, utcnow
from app.models.tenant import TenantRow


def _tenant_exists(existing: TenantRow) -> Conflict:
    return Conflict(
        f"A tenant named {existing.name!r} exists; tenant names are unique.",
        code="tenant_exists",
        details={"tenant_id": str(existing.id)},
    )


async def create_tenant(conn: asyncpg.Connection, body: TenantCreate) -> TenantRow:
    """Create a tenant; its name must be new (409 `tenant_exists` names the existing one)."""
    existing = await repository.get_tenant_by_name(conn, body.name)
    if existing is not None:
        raise _tenant_exists(existing)
    try:
        async with conn.transaction():  # a savepoint in the session's transaction
            return await repository.add_tenant(
                conn,
                tenant_id=uuid.uuid4(),
                name=body.name,
                text_search_config=body.text_search_config,
                created_at=utcnow(),
            )
    except asyncpg.UniqueViolationError as exc:  # created by a concurrent request since
        existing = await repository.get_tenant_by_name(conn, body.name)
        if existing is None:
            raise
        raise _tenant_exists(existing) from exc


async def create_cli_key(
    conn: asyncpg.Connection,
    *,
    role: str,
    tenant_id: uuid.UUID | None,
    tenant_name: str,
    agent_id: str | None,
) -> tuple[TenantRow, bool, str]:
    """`loom-memory create-key`: a key for the tenant with this id, else for the tenant with
    this name (created when there is none). Returns (tenant, tenant created now, secret)."""
    created = False
    if tenant_id is not None:
        tenant = await repository.get_tenant(conn, tenant_id)
        if tenant is None:
            raise NotFound(f"No tenant has the id {tenant_id}.")
    else:
        tenant = await repository.get_tenant_by_name(conn, tenant_name)
        if tenant is None:
            tenant = await create_tenant(conn, TenantCreate(name=tenant_name))
            created = True
    secret = generate_key()
    await _add_key(conn, tenant.id, name="cli", role=role, agent_id=agent_id, secret=secret)
    return tenant, created, secret


async def _add_key(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    *,
    name: str,
    role: str,
    agent_id: str | None,
    secret: str,
) -> ApiKeyRow:
    """Store a key for `secret` (its hash and display prefix, never the secret)."""
    return await repository.add_key(
        conn,
        key_id=new_id(),
        tenant_id=tenant_id,
        name=name,
        role=role,
        agent_id=agent_id,
        key_hash=hash_key(secret),
        prefix=display_prefix(secret),
        created_at=utcnow(),
    )


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


async def create_key(
    conn: asyncpg.Connection, principal: Principal, body: ApiKeyCreate
) -> tuple[ApiKeyRow, str]:
    """Create a key and return it with its secret (which is never stored or shown again).

    Decision: service keys may mint `agent` keys for their own tenant, so an agent runtime
    can hand each of its agents a key bound to it; only admins create admin/service keys.
    """
    tenant_id = _target_tenant(principal, body.tenant_id)
    if principal.role == "service" and body.role != "agent":
        raise Forbidden("Service keys may only create agent keys.")
    if await repository.get_tenant(conn, tenant_id) is None:
        raise NotFound("No such tenant.")
    secret = generate_key()
    key = await _add_key(
        conn, tenant_id, name=body.name, role=body.role, agent_id=body.agent_id, secret=secret
    )
    return key, secret


async def list_keys(
    conn: asyncpg.Connection,
    principal: Principal,
    tenant_id: uuid.UUID | None,
    *,
    after: uuid.UUID | None,
    limit: int,
) -> list[ApiKeyRow]:
    target = _target_tenant(principal, tenant_id)
    role = "agent" if principal.role == "service" else None
    return await repository.list_keys(conn, target, after=after, limit=limit, role=role)


async def revoke_key(
    conn: asyncpg.Connection, principal: Principal, tenant_id: uuid.UUID | None, key_id: uuid.UUID
) -> ApiKeyRow:
    """Revoke the key (a key revoked already stays as it was); the key as it now is."""
    target = _target_tenant(principal, tenant_id)
    key = await repository.get_key(conn, target, key_id)
    if key is None or (principal.role == "service" and key.role != "agent"):
        raise NotFound("No such API key.")
    if key.revoked_at is not None:
        return key
    now = datetime.now(UTC)
    await repository.revoke_key(conn, target, key.id, now)
    return key._replace(revoked_at=now)

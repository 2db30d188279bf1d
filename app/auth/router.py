"""Tenants and API keys (admin; service keys manage their tenant's agent keys)."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response

from app.auth import examples, service
from app.auth.cache import KeyCache
from app.auth.deps import ActingAgentDep, DbDep, NamedTenantDep, PrincipalDep
from app.auth.schemas import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyList,
    ApiKeyPublic,
    TenantCreate,
    TenantPublic,
    WhoAmI,
)
from app.core.db import after_commit
from app.core.errors import ERROR_RESPONSES, Forbidden
from app.core.pagination import (
    CursorQuery,
    decode_cursor,
    fetch_limit,
    invalid_cursor,
    page,
)
from app.state import app_state

router = APIRouter(tags=["admin"], responses=ERROR_RESPONSES)


@router.get("/me", response_model=WhoAmI, summary="Describe the calling key")
async def who_am_i(principal: PrincipalDep, named: NamedTenantDep, agent: ActingAgentDep) -> WhoAmI:
    """The key's role, its tenant (or the one an admin key names) and the agent it acts as:
    what a client (the console) needs to know which calls it may make."""
    tenant = named or principal.tenant_id
    return WhoAmI(
        role=principal.role,  # type: ignore[arg-type]
        tenant_id=str(tenant) if tenant else None,
        agent_id=agent,
        key_id=str(principal.key_id) if principal.key_id else None,
    )


@router.post("/tenants", status_code=201, response_model=TenantPublic, summary="Create a tenant")
async def create_tenant(
    body: Annotated[TenantCreate, Body(openapi_examples=examples.TENANT)],
    db: DbDep,
    principal: PrincipalDep,
) -> TenantPublic:
    """Create a tenant (admin). Names are unique: a name that exists is 409 `tenant_exists`,
    with the existing tenant's id in `details.tenant_id`."""
    if principal.role != "admin":
        raise Forbidden("Only admin keys create tenants.")
    tenant = await service.create_tenant(db, body)
    return TenantPublic.model_validate(tenant, from_attributes=True)


@router.post(
    "/api-keys", status_code=201, response_model=ApiKeyCreated, summary="Create an API key"
)
async def create_api_key(
    body: Annotated[ApiKeyCreate, Body(openapi_examples=examples.API_KEY)],
    db: DbDep,
    principal: PrincipalDep,
    named_tenant: NamedTenantDep,
) -> ApiKeyCreated:
    """Create a key. The secret is in this response only; only its hash is stored."""
    if body.tenant_id is None:
        body.tenant_id = named_tenant
    key, secret = await service.create_key(db, principal, body)
    public = ApiKeyPublic.model_validate(key, from_attributes=True)
    return ApiKeyCreated(**public.model_dump(), secret=secret)


@router.get("/api-keys", response_model=ApiKeyList, summary="List a tenant's API keys")
async def list_api_keys(
    db: DbDep,
    principal: PrincipalDep,
    named_tenant: NamedTenantDep,
    tenant_id: uuid.UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: CursorQuery = None,
) -> ApiKeyList:
    """List a tenant's keys (never their secrets)."""
    after = None
    data = decode_cursor(cursor, {"after": str})
    if data is not None:
        try:
            after = uuid.UUID(data["after"])
        except ValueError as exc:
            raise invalid_cursor() from exc
    keys = await service.list_keys(
        db,
        principal,
        tenant_id or named_tenant,
        after=after,
        limit=fetch_limit(limit),
    )
    rows, nxt = page(keys, limit, lambda k: {"after": str(k.id)})
    return ApiKeyList(
        items=[ApiKeyPublic.model_validate(k, from_attributes=True) for k in rows], next_cursor=nxt
    )


@router.delete(
    "/api-keys/{key_id}", status_code=204, response_class=Response, summary="Revoke an API key"
)
async def revoke_api_key(
    key_id: uuid.UUID,
    db: DbDep,
    principal: PrincipalDep,
    request: Request,
    named_tenant: NamedTenantDep,
    tenant_id: uuid.UUID | None = None,
) -> Response:
    """Revoke a key; it stops working on the next request."""
    key = await service.revoke_key(db, principal, tenant_id or named_tenant, key_id)
    cache = app_state(request.app).parts[KeyCache]
    if cache is not None:
        cache.drop(key.key_hash)  # before commit too, so no request here re-caches it
        key_hash = key.key_hash

        async def _broadcast() -> None:
            await cache.revoked(key_hash)

        after_commit(db, _broadcast)
    return Response(status_code=204)

"""Tenants and API keys (admin; service keys manage their tenant's agent keys)."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.auth import service
from app.auth.deps import PrincipalDep
from app.auth.schemas import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyList,
    ApiKeyPublic,
    TenantCreate,
    TenantPublic,
)
from app.core.db import DbDep, after_commit
from app.core.errors import ERROR_RESPONSES, BadRequest, Forbidden
from app.core.pagination import (
    CursorQuery,
    decode_cursor,
    fetch_limit,
    invalid_cursor,
    page,
)
from app.state import app_state

router = APIRouter(tags=["admin"], responses=ERROR_RESPONSES)


def _tenant_param(request: Request, tenant_id: uuid.UUID | None) -> uuid.UUID | None:
    if tenant_id is not None:
        return tenant_id
    raw = request.headers.get("x-tenant-id")
    if raw:
        try:
            return uuid.UUID(raw)
        except ValueError as exc:
            raise BadRequest("X-Tenant-Id is not a valid id.") from exc
    return None


@router.post("/tenants", status_code=201, response_model=TenantPublic)
async def create_tenant(body: TenantCreate, db: DbDep, principal: PrincipalDep) -> TenantPublic:
    """Create a tenant (admin)."""
    if principal.role != "admin":
        raise Forbidden("Only admin keys create tenants.")
    tenant = await service.create_tenant(db, body)
    return TenantPublic.model_validate(tenant, from_attributes=True)


@router.post("/api-keys", status_code=201, response_model=ApiKeyCreated)
async def create_api_key(body: ApiKeyCreate, db: DbDep, principal: PrincipalDep,
                         request: Request) -> ApiKeyCreated:
    """Create a key. The secret is in this response only; only its hash is stored."""
    if body.tenant_id is None:
        body.tenant_id = _tenant_param(request, None)
    key, secret = await service.create_key(db, principal, body)
    public = ApiKeyPublic.model_validate(key, from_attributes=True)
    return ApiKeyCreated(**public.model_dump(), secret=secret)


@router.get("/api-keys", response_model=ApiKeyList)
async def list_api_keys(
    db: DbDep, principal: PrincipalDep, request: Request,
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
    keys = await service.list_keys(db, principal, _tenant_param(request, tenant_id),
                                   after=after, limit=fetch_limit(limit))
    rows, nxt = page(keys, limit, lambda k: {"after": str(k.id)})
    return ApiKeyList(items=[ApiKeyPublic.model_validate(k, from_attributes=True) for k in rows],
                      next_cursor=nxt)


@router.delete("/api-keys/{key_id}", status_code=204, response_class=Response)
async def revoke_api_key(key_id: uuid.UUID, db: DbDep, principal: PrincipalDep,
                         request: Request, tenant_id: uuid.UUID | None = None) -> Response:
    """Revoke a key; it stops working on the next request."""
    key = await service.revoke_key(db, principal, _tenant_param(request, tenant_id), key_id)
    cache = app_state(request.app).key_cache
    if cache is not None:
        cache.drop(key.key_hash)  # before commit too, so no request here re-caches it
        key_hash = key.key_hash

        async def _broadcast() -> None:
            await cache.revoked(key_hash)

        after_commit(db, _broadcast)
    return Response(status_code=204)

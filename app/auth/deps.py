"""Authentication: one dependency yields the caller for every /v1 route."""

import hmac
import math
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

import asyncpg
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.auth import repository
from app.auth.cache import KeyCache
from app.auth.caller import Caller, check_agent_id, effective_agent
from app.auth.keys import hash_key
from app.auth.ratelimit import take_token
from app.core.config import Settings
from app.core.db import request_connection
from app.core.errors import BadRequest, NotFound, TooManyRequests, Unauthorized
from app.core.query_params import reject_unknown_query
from app.state import app_state

bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer lm_...`")


@dataclass(frozen=True)
class Principal:
    """The key behind a request, before a tenant is chosen."""

    role: str
    tenant_id: uuid.UUID | None  # None only for the bootstrap admin key
    bound_agent: str | None
    key_id: uuid.UUID | None


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


async def get_principal(request: Request, creds: Credentials) -> Principal:
    """Resolve the bearer key; 401 for a missing, unknown or revoked key."""
    return await _principal(request, creds.credentials if creds is not None else None)


async def _principal(request: Request, secret: str | None) -> Principal:
    """The key `secret` names (the bearer credentials; None or empty: none was sent); once
    per request (`DbDep` authenticates first, the route's own dependency finds it then)."""
    known: Principal | None = getattr(request.state, "loom_principal", None)
    if known is not None:
        return known
    if not secret:
        raise Unauthorized(
            "Send an API key as `Authorization: Bearer <key>`.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    state = app_state(request.app)
    settings: Settings = state.settings
    key_hash = hash_key(secret)
    cache = state.parts[KeyCache]
    if cache.admin_hash is not None and hmac.compare_digest(key_hash, cache.admin_hash):
        principal = Principal("admin", None, None, None)
    else:
        cached = cache.get(key_hash)
        if cached is not None:
            principal = cached
        else:
            async with state.connection() as conn:
                key = await repository.key_by_hash(conn, key_hash)
            if key is None or key.revoked_at is not None:
                raise Unauthorized(
                    "The API key is not valid.", headers={"WWW-Authenticate": "Bearer"}
                )
            principal = Principal(key.role, key.tenant_id, key.agent_id, key.id)
            cache.put(key_hash, principal)
    if settings.rate_limit_per_second > 0:
        ident = str(principal.key_id or "bootstrap-admin")
        wait = await take_token(
            state.redis, ident, settings.rate_limit_per_second, settings.rate_limit_burst
        )
        if wait is not None:
            raise TooManyRequests(
                "Rate limit exceeded for this key.",
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
    reject_unknown_query(request)  # every /v1 route authenticates here
    request.state.loom_principal = principal
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def _bearer(request: Request) -> str | None:
    """The credentials `bearer` resolves (FastAPI's `HTTPBearer` without `auto_error`),
    read from the header directly: the request path's one dependency call fewer."""
    authorization = request.headers.get("authorization")
    if not authorization:
        return None
    scheme, _, credentials = authorization.partition(" ")
    credentials = credentials.strip()
    if not (scheme and credentials) or scheme.lower() != "bearer":
        return None
    return credentials


async def _tenant_exists(request: Request, tenant_id: uuid.UUID) -> bool:
    """Whether the tenant an admin key names exists; a tenant found is remembered in the key
    cache (its TTL), so an admin's requests do not each look it up."""
    state = app_state(request.app)
    cache, mark = state.parts[KeyCache], f"tenant:{tenant_id}"
    if cache is not None and cache.get(mark) is not None:
        return True
    async with state.connection() as conn:
        found = await repository.tenant_exists(conn, tenant_id)
    if found and cache is not None:
        cache.put(mark, True)
    return found


def _header_tenant(request: Request) -> uuid.UUID | None:
    raw = request.headers.get("x-tenant-id")
    if raw is None:
        return None
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise BadRequest("X-Tenant-Id is not a valid id.", code="invalid_tenant_id") from exc


async def get_named_tenant(request: Request, principal: PrincipalDep) -> uuid.UUID | None:
    """The tenant an admin key names with X-Tenant-Id (None without it). Other keys act in
    their own tenant and the header is ignored, as in `get_caller`."""
    return _header_tenant(request) if principal.role == "admin" else None


NamedTenantDep = Annotated[uuid.UUID | None, Depends(get_named_tenant)]


def _acting_agent(request: Request, principal: Principal) -> str | None:
    """The agent the key acts as: an agent key's own, or X-Agent-Id of a service or admin
    key (checked; an agent key naming another agent is 403)."""
    header_agent = request.headers.get("x-agent-id") or None
    if header_agent is not None:
        check_agent_id(header_agent, "header.x-agent-id")
    return effective_agent(principal.role, principal.bound_agent, header_agent)


async def get_acting_agent(request: Request, principal: PrincipalDep) -> str | None:
    """`_acting_agent` as a dependency, without a tenant (`GET /v1/me`)."""
    return _acting_agent(request, principal)


ActingAgentDep = Annotated[str | None, Depends(get_acting_agent)]


async def get_caller(request: Request) -> Caller:
    """The caller acting in one tenant. Admin keys name the tenant with X-Tenant-Id.
    (It reads the bearer key itself rather than depending on `bearer` or `get_principal`:
    every /v1 request runs it, and each dependency node costs FastAPI about 10 us to solve.
    The operations' `security` in the OpenAPI document comes from `app.auth.openapi`.)"""
    principal = await _principal(request, _bearer(request))
    agent = _acting_agent(request, principal)
    tenant_id = principal.tenant_id
    if principal.role == "admin":
        named = _header_tenant(request)
        if named is not None:
            if named != tenant_id and not await _tenant_exists(request, named):
                raise NotFound("No such tenant.")
            tenant_id = named
        if tenant_id is None:
            raise BadRequest(
                "Admin keys name the tenant to act in with X-Tenant-Id.", code="tenant_required"
            )
    assert tenant_id is not None
    return Caller(
        tenant_id=tenant_id,
        role=principal.role,  # type: ignore[arg-type]
        agent_id=agent,
        key_id=principal.key_id,
    )


CallerDep = Annotated[Caller, Depends(get_caller)]


async def get_db(request: Request) -> AsyncIterator[asyncpg.Connection]:
    """The route's connection (`app.core.db.request_connection`), taken once the caller is
    authenticated: a route never holds a transaction while its key is looked up on the hot
    paths' pool (behind PgBouncer in transaction mode both pools share its few server
    connections, and six requests each holding a BEGIN and waiting for a second one took
    all three)."""
    await _principal(request, _bearer(request))
    async with request_connection(request) as conn:
        yield conn


# scope="function": commit before the response is sent, so a client never reads before
# its write is visible and a failed commit is reported as an error.
DbDep = Annotated[asyncpg.Connection, Depends(get_db, scope="function")]

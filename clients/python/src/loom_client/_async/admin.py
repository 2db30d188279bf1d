"""Tenants and API keys, and the health endpoints."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Literal

from loom_client import _wire
from loom_client._async.base import AsyncBaseClient
from loom_client._wire import RequestOptions, segment
from loom_client.models.auth import (
    ApiKey,
    ApiKeyCreated,
    ApiKeyList,
    Readiness,
    Role,
    Tenant,
    WhoAmI,
)
from loom_client.models.usage import Budget, UsageGroupBy, UsageReport
from loom_client.operations import operation


class AsyncAdminMixin(AsyncBaseClient):
    @operation("GET", "/v1/me")
    async def me(self, *, options: RequestOptions | None = None) -> WhoAmI:
        """The calling key: its role, tenant and the agent it acts as."""
        return await self._request(WhoAmI, "GET", "/v1/me", options=options)

    @operation("POST", "/v1/tenants")
    async def create_tenant(self, name: str, *,
                            text_search_config: Literal["english", "simple"] | None = None,
                            options: RequestOptions | None = None) -> Tenant:
        """Create a tenant (admin keys)."""
        return await self._request(Tenant, "POST", "/v1/tenants", options=options,
                                   json=_wire.body(name=name,
                                                   text_search_config=text_search_config))

    @operation("POST", "/v1/api-keys")
    async def create_api_key(self, role: Role, *, tenant_id: str | None = None,
                             agent_id: str | None = None, name: str | None = None,
                             options: RequestOptions | None = None) -> ApiKeyCreated:
        """Create a key; its `secret` is in this answer only. Admin keys name the tenant
        (`tenant_id`, or the client's tenant); service keys mint agent keys for theirs."""
        return await self._request(ApiKeyCreated, "POST", "/v1/api-keys", options=options,
                                   json=_wire.body(role=role, tenant_id=tenant_id,
                                                   agent_id=agent_id, name=name))

    @operation("GET", "/v1/api-keys")
    async def list_api_keys(self, *, tenant_id: str | None = None, limit: int | None = None,
                            cursor: str | None = None,
                            options: RequestOptions | None = None) -> ApiKeyList:
        """One page of a tenant's keys (never their secrets)."""
        return await self._request(ApiKeyList, "GET", "/v1/api-keys", options=options,
                                   params=_wire.query(tenant_id=tenant_id, limit=limit,
                                                      cursor=cursor))

    @operation("GET", "/v1/api-keys")
    async def iter_api_keys(self, *, tenant_id: str | None = None,
                            page_size: int | None = None,
                            options: RequestOptions | None = None) -> AsyncIterator[ApiKey]:
        """Every key of the tenant, following the cursors."""
        cursor: str | None = None
        while True:
            page = await self.list_api_keys(tenant_id=tenant_id, limit=page_size,
                                            cursor=cursor, options=options)
            for item in page.items:
                yield item
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("DELETE", "/v1/api-keys/{key_id}")
    async def revoke_api_key(self, key_id: str, *, tenant_id: str | None = None,
                             options: RequestOptions | None = None) -> None:
        """Revoke a key; it stops working on the next request."""
        await self._send("DELETE", f"/v1/api-keys/{segment(key_id)}", options=options,
                         params=_wire.query(tenant_id=tenant_id))

    @operation("GET", "/v1/usage")
    async def get_usage(self, *, group_by: UsageGroupBy | None = None,
                        since: datetime | None = None, until: datetime | None = None,
                        limit: int | None = None,
                        options: RequestOptions | None = None) -> UsageReport:
        """The tenant's LLM calls and tokens over a range (default: the last 30 days),
        grouped by day, purpose, model, session, user or agent, with its daily budget."""
        return await self._request(
            UsageReport, "GET", "/v1/usage", options=options,
            params=_wire.query(group_by=group_by,
                               since=since.isoformat() if since else None,
                               until=until.isoformat() if until else None, limit=limit))

    @operation("GET", "/v1/tenants/{tenant_id}/budget")
    async def get_budget(self, tenant_id: str, *,
                         options: RequestOptions | None = None) -> Budget:
        """A tenant's daily token budget in force and today's spending."""
        return await self._request(Budget, "GET", f"/v1/tenants/{segment(tenant_id)}/budget",
                                   options=options)

    @operation("PUT", "/v1/tenants/{tenant_id}/budget")
    async def set_budget(self, tenant_id: str, daily_tokens: int | None, *,
                         options: RequestOptions | None = None) -> Budget:
        """Set a tenant's own daily token budget (admin keys); None: no budget at all."""
        return await self._request(Budget, "PUT", f"/v1/tenants/{segment(tenant_id)}/budget",
                                   options=options, json={"daily_tokens": daily_tokens})

    @operation("DELETE", "/v1/tenants/{tenant_id}/budget")
    async def reset_budget(self, tenant_id: str, *,
                           options: RequestOptions | None = None) -> Budget:
        """Drop a tenant's own budget: the server's default applies again (admin keys)."""
        return await self._request(Budget, "DELETE",
                                   f"/v1/tenants/{segment(tenant_id)}/budget", options=options)

    @operation("GET", "/healthz")
    async def healthz(self, *, options: RequestOptions | None = None) -> dict[str, str]:
        """Liveness: `{"status": "ok", "version": "<the server's version>"}` while the
        process is up."""
        response = await self._send("GET", "/healthz", options=options)
        return {str(k): str(v) for k, v in response.json().items()}

    @operation("GET", "/readyz")
    async def readyz(self, *, options: RequestOptions | None = None) -> Readiness:
        """Readiness: PostgreSQL and Redis both answer (else raises Unavailable, whose
        `details` are the checks)."""
        return await self._request(Readiness, "GET", "/readyz", options=options)

    @operation("GET", "/metrics")
    async def metrics(self, *, options: RequestOptions | None = None) -> str:
        """Prometheus metrics (text exposition format)."""
        response = await self._send("GET", "/metrics", options=options,
                                    headers={"Accept": "text/plain"})
        return response.text

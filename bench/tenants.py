"""A fresh tenant and its service key, through the admin API of an app the bench runs
in-process (httpx's ASGI transport)."""

from __future__ import annotations

import uuid

import httpx


async def fresh_tenant(
    transport: httpx.ASGITransport, admin_key: str, prefix: str
) -> tuple[str, str]:
    """(tenant id, service key secret) of a new tenant named `<prefix>-<hex>`."""
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://b",
        timeout=600,
        headers={"Authorization": f"Bearer {admin_key}"},
    ) as a:
        r = await a.post("/v1/tenants", json={"name": f"{prefix}-{uuid.uuid4().hex[:6]}"})
        tid = r.json()["id"]
        r = await a.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
        return tid, r.json()["secret"]

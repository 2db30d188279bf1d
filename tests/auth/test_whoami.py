"""GET /v1/me: the calling key's role, tenant and agent."""

from typing import Any

import httpx


async def test_me_describes_each_kind_of_key(
    tenant: Any, admin_client: httpx.AsyncClient, app: Any
) -> None:
    service = tenant.client_for(tenant.service_key)
    me = (await service.get("/v1/me")).json()
    assert (me["role"], me["tenant_id"], me["agent_id"]) == ("service", tenant.id, None)
    assert me["key_id"]
    acting = (await service.get("/v1/me", headers={"X-Agent-Id": "planner"})).json()
    assert acting["agent_id"] == "planner"

    agent = await tenant.new_client(role="agent", agent_id="scout")
    me = (await agent.get("/v1/me")).json()
    assert (me["role"], me["tenant_id"], me["agent_id"]) == ("agent", tenant.id, "scout")
    other = await agent.get("/v1/me", headers={"X-Agent-Id": "planner"})
    assert other.status_code == 403 and other.json()["error"]["code"] == "agent_mismatch"

    me = (await admin_client.get("/v1/me")).json()
    assert (me["role"], me["tenant_id"], me["key_id"]) == ("admin", None, None)
    named = (await admin_client.get("/v1/me", headers={"X-Tenant-Id": tenant.id})).json()
    assert named["tenant_id"] == tenant.id

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as anonymous:
        assert (await anonymous.get("/v1/me")).status_code == 401
    bad = await service.get("/v1/me", headers={"X-Agent-Id": "no spaces allowed"})
    assert bad.status_code == 400, bad.text

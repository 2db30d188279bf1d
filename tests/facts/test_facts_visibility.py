"""The `agent` tier is private to its agent, exactly as the `agent` shared-memory namespace:
its agent key and service keys acting for it see it; another agent, a service key acting for
no agent or for another agent, and another tenant get 404 / see nothing, on every route that
lists or reads items, search (search_facts), packages and the context."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from tests.facts.support import facts_session, items

FACT = "The user is allergic to peanuts."


async def tool(
    client: httpx.AsyncClient, sid: str, name: str, args: dict[str, Any]
) -> tuple[bool, Any]:
    r = await client.post(
        f"/v1/sessions/{sid}/tool-calls",
        json={"type": "tool_use", "id": "toolu_1", "name": name, "input": args},
    )
    assert r.status_code == 200, r.text
    return bool(r.json().get("is_error")), json.loads(r.json()["content"])


async def sees_nothing(c: httpx.AsyncClient, fid: str) -> None:
    for path in (f"/v1/memory-items/{fid}", f"/v1/memory-items/{fid}/history"):
        r = await c.get(path)
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["code"] == "memory_item_not_found"
    assert (await c.post(f"/v1/memory-items/{fid}/promote", json={})).status_code == 404
    for include in (False, True):
        assert FACT not in [f["text"] for f in await items(c, include_invalidated=include)]
    r = await c.post("/v1/memory-items/query", json={"filters": {"scope": "agent"}})
    assert r.status_code == 200 and r.json()["items"] == [], r.text
    r = await c.post("/v1/memory-items/query", json={"filters": {"text": FACT}})
    assert r.json()["items"] == []
    pkg = await c.post("/v1/context-packages", json={"budget_tokens": 5000, "include_global": True})
    assert FACT not in pkg.text


async def test_agent_tier_is_private_to_its_agent(
    tenant: Any, admin_client: httpx.AsyncClient, app: Any
) -> None:
    owner = await tenant.new_client("agent", "agent-1")
    r = await owner.post(
        "/v1/memory-items", json={"scope": "agent", "kind": "fact", "text": FACT, "importance": 0.9}
    )
    assert r.status_code == 201, r.text
    fid = r.json()["id"]
    assert r.json()["scope"] == "agent/agent-1"

    # the owner and service keys acting for agent-1 see it everywhere
    as_owner = await tenant.new_client("service", "agent-1")
    for c in (owner, as_owner):
        assert (await c.get(f"/v1/memory-items/{fid}")).status_code == 200
        assert (await c.get(f"/v1/memory-items/{fid}/history")).status_code == 200
        assert [f["id"] for f in await items(c)] == [fid]
        sid = await facts_session(c)
        err, found = await tool(c, sid, "search_facts", {"query": "peanuts allergy"})
        assert not err and [f["id"] for f in found["facts"]] == [fid]
        await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "Can you suggest a snack?"}]},
        )
        ctx = (await c.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
        assert FACT in ctx["layers"]["facts"]["text"]

    # others: another agent's key, a service key for another agent or for none,
    # another tenant's service key
    other_agent = await tenant.new_client("agent", "agent-2")
    service_other = await tenant.new_client("service", "agent-2")
    service_none = await tenant.new_client("service", None)
    t2 = (
        await admin_client.post("/v1/tenants", json={"name": f"t-{uuid.uuid4().hex[:8]}"})
    ).json()["id"]
    key = (
        await admin_client.post("/v1/api-keys", json={"tenant_id": t2, "role": "service"})
    ).json()["secret"]
    other_tenant = tenant.client_for(key, {"X-Agent-Id": "agent-1"})
    for c in (other_agent, service_other, service_none, other_tenant):
        await sees_nothing(c, fid)
    for c in (other_agent, service_other, other_tenant):
        sid = await facts_session(c)
        await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "Tell me about peanuts."}]},
        )
        err, found = await tool(
            c, sid, "search_facts", {"query": "peanuts", "include_invalidated": True}
        )
        assert not err and found["facts"] == []
        err, out = await tool(c, sid, "forget_fact", {"id": fid, "reason": "x"})
        assert err and out["error"]["code"] == "MEMORY_ITEM_NOT_FOUND"
        ctx = (await c.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
        assert ctx["layers"]["facts"] is None and ctx["tokens"]["facts"] == 0
    # deleting is refused to them too, and nobody can write into agent-1's tier
    for c in (other_agent, service_other, service_none, other_tenant):
        assert (await c.delete(f"/v1/memory-items/{fid}")).status_code == 404
    r = await other_agent.post(
        "/v1/memory-items", json={"scope": "agent/agent-1", "kind": "fact", "text": "x"}
    )
    assert r.status_code == 403 and r.json()["error"]["code"] == "agent_mismatch"
    r = await service_none.post(
        "/v1/memory-items", json={"scope": "agent", "kind": "fact", "text": "x"}
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "agent_required"
    r = await owner.post("/v1/memory-items/clear", json={"scope": "agent/agent-2"})
    assert r.status_code == 403
    # still there for its owner
    assert (await owner.get(f"/v1/memory-items/{fid}")).status_code == 200


async def test_profile_facts_config_is_the_default_of_new_sessions(
    client: httpx.AsyncClient,
) -> None:
    r = await client.put(
        "/v1/agents/agent-1/profile",
        json={
            "system_prompt": "You help.",
            "facts": {"enabled": True, "scope": "project/p1", "share": 0.1, "min_batch": 4},
        },
    )
    assert r.status_code in (200, 201), r.text
    assert r.json()["facts"]["scope"] == "project/p1"
    s = (await client.post("/v1/sessions", json={})).json()
    assert s["config"]["facts"] == {
        "enabled": True,
        "scope": "project/p1",
        "share": 0.1,
        "min_batch": 4,
    }
    own = (await client.post("/v1/sessions", json={"config": {"facts": {"enabled": False}}})).json()
    assert own["config"]["facts"]["enabled"] is False
    r = await client.patch(
        f"/v1/sessions/{own['id']}",
        json={"config": {"facts": {"enabled": True, "scope": "nowhere"}}},
    )
    assert r.status_code == 422

"""Users (issue 28) through HTTP: `user_id` on sessions (validated like agent ids, set at
creation, a filter of the sessions list), the users list and one user, the `user/<id>`
knowledge tier under its one visibility rule, and search across a user's sessions."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import sqlalchemy as sa

from tests.support.api import make_client


async def user_session(
    client: httpx.AsyncClient, user_id: str, agent_id: str | None = None, *texts: str, **config: Any
) -> str:
    body: dict[str, Any] = {"user_id": user_id}
    if agent_id:
        body["agent_id"] = agent_id
    if config:
        body["config"] = config
    r = await client.post("/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["user_id"] == user_id
    sid = str(r.json()["id"])
    if texts:
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [
                    {"role": "user" if i % 2 == 0 else "assistant", "content": t}
                    for i, t in enumerate(texts)
                ]
            },
        )
        assert r.status_code == 201, r.text
    return sid


async def test_user_id_is_set_at_creation_validated_and_filters_the_list(
    client: httpx.AsyncClient, db: Any
) -> None:
    u = f"cust-{uuid.uuid4().hex[:8]}"
    s1 = await user_session(client, u, None, "hello", "hi")
    s2 = await user_session(client, u, "agent-2")
    await user_session(client, f"other-{uuid.uuid4().hex[:6]}")
    stored = (
        await db.execute(sa.text("SELECT user_id FROM sessions WHERE id = :s"), {"s": s1})
    ).scalar_one()
    assert stored == u
    r = await client.get("/v1/sessions", params={"user_id": u})
    assert r.status_code == 200 and {s["id"] for s in r.json()["items"]} == {s1, s2}
    assert (await client.get(f"/v1/sessions/{s1}")).json()["user_id"] == u
    for bad in ("", "-x", "a b", "x" * 201, "ü"):
        r = await client.post("/v1/sessions", json={"user_id": bad})
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["error"]["code"] == "validation_error"
    r = await client.get("/v1/sessions", params={"user_id": "a b"})
    assert r.status_code == 422
    # set at creation only
    r = await client.patch(f"/v1/sessions/{s1}", json={"user_id": "someone-else"})
    assert r.status_code == 422


async def test_users_list_pages_and_one_user(client: httpx.AsyncClient) -> None:
    prefix = f"p{uuid.uuid4().hex[:6]}"
    users = [f"{prefix}-{i}" for i in range(5)]
    for i, u in enumerate(users):
        for _ in range(i % 2 + 1):
            await user_session(client, u, None, "one", "two")
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        r = await client.get("/v1/users", params=params)
        assert r.status_code == 200, r.text
        seen += r.json()["items"]
        cursor = r.json()["next_cursor"]
        if not cursor:
            break
    mine = [u for u in seen if u["id"].startswith(prefix)]
    assert [u["id"] for u in mine] == users
    assert [u["session_count"] for u in mine] == [1, 2, 1, 2, 1]
    assert all(u["message_count"] == 2 * u["session_count"] for u in mine)
    assert all(u["last_activity"] and u["first_seen"] for u in mine)
    r = await client.get(f"/v1/users/{users[1]}")
    assert r.status_code == 200 and r.json()["session_count"] == 2
    assert r.json()["fact_count"] == 0
    r = await client.get("/v1/users/nobody-here")
    assert r.status_code == 404 and r.json()["error"]["code"] == "user_not_found"
    r = await client.get("/v1/users", params={"cursor": "garbage"})
    assert r.status_code == 400


async def test_the_user_tier_follows_the_one_rule(tenant: Any, app: Any) -> None:
    u = f"u-{uuid.uuid4().hex[:8]}"
    service = tenant.client_for(tenant.service_key)
    a1 = await tenant.new_client(role="agent", agent_id="a1")
    a2 = await tenant.new_client(role="agent", agent_id="a2")
    await user_session(a1, u)
    # agent key with a session with the user: writes and reads the tier
    r = await a1.post(
        "/v1/memory-items",
        json={"scope": f"user/{u}", "kind": "fact", "text": "Prefers email over phone."},
    )
    assert r.status_code == 201, r.text
    item = r.json()["id"]
    assert r.json()["scope"] == f"user/{u}"
    r = await service.post(
        "/v1/memory-items", json={"scope": f"user/{u}", "kind": "note", "text": "VIP since 2024."}
    )
    assert r.status_code == 201, r.text
    for c in (a1, service):
        assert (await c.get(f"/v1/memory-items/{item}")).status_code == 200
        r = await c.post("/v1/memory-items/query", json={"filters": {"scope": f"user/{u}"}})
        assert len(r.json()["items"]) == 2
    # an unrelated agent: nothing, and 404 on every door
    assert (await a2.get(f"/v1/memory-items/{item}")).status_code == 404
    r = await a2.post("/v1/memory-items/query", json={"filters": {"scope": f"user/{u}"}})
    assert r.json()["items"] == []
    r = await a2.post("/v1/memory-items", json={"scope": f"user/{u}", "kind": "fact", "text": "x"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "user_not_found"
    assert (await a2.delete(f"/v1/memory-items/{item}")).status_code == 404
    assert (await a2.get(f"/v1/users/{u}")).status_code == 404
    r = await a2.get("/v1/users")
    assert all(x["id"] != u for x in r.json()["items"])
    assert (await a1.get(f"/v1/users/{u}")).json()["fact_count"] == 2
    # an agent key that sees the user still may not erase them (other agents' sessions)
    r = await a1.delete(f"/v1/users/{u}")
    assert r.status_code == 403 and r.json()["error"]["code"] == "erasure_forbidden"
    assert (await a2.delete(f"/v1/users/{u}")).status_code == 404
    # the bare `user` scope names nobody outside a session's facts config
    r = await service.post("/v1/memory-items", json={"scope": "user", "kind": "fact", "text": "x"})
    assert r.status_code in (400, 422)
    # another tenant's service key: 404
    other = await tenant.admin.post("/v1/tenants", json={"name": f"o-{uuid.uuid4().hex[:6]}"})
    key = await tenant.admin.post(
        "/v1/api-keys", json={"tenant_id": other.json()["id"], "role": "service"}
    )
    async with make_client(app, key.json()["secret"]) as stranger:
        assert (await stranger.get(f"/v1/users/{u}")).status_code == 404
        assert (await stranger.get(f"/v1/memory-items/{item}")).status_code == 404
        assert (await stranger.delete(f"/v1/users/{u}")).status_code == 404


async def test_search_across_a_users_sessions(tenant: Any) -> None:
    u = f"s-{uuid.uuid4().hex[:8]}"
    service = tenant.client_for(tenant.service_key)
    a1 = await tenant.new_client(role="agent", agent_id="a1")
    a2 = await tenant.new_client(role="agent", agent_id="a2")
    s1 = await user_session(a1, u, None, "my parcel tracking number is zx81", "thanks")
    s2 = await user_session(a2, u, None, "the parcel zx81 never arrived", "sorry")
    await user_session(service, f"x-{u}", "a1", "parcel zx81 belongs to someone else", "ok")
    body = {"query": "parcel zx81", "scope": "user", "user_id": u, "rerank": False}
    r = await service.post("/v1/search", json=body)
    assert r.status_code == 200, r.text
    assert {h["session_id"] for h in r.json()["results"]} == {s1, s2}
    r = await a1.post("/v1/search", json=body)  # an agent key: its own agent's sessions
    assert {h["session_id"] for h in r.json()["results"]} == {s1}
    a3 = await tenant.new_client(role="agent", agent_id="a3")
    r = await a3.post("/v1/search", json=body)
    assert r.status_code == 404 and r.json()["error"]["code"] == "user_not_found"
    r = await service.post("/v1/search", json={"query": "x", "scope": "user"})
    assert r.status_code == 400


async def test_context_recalls_the_users_other_sessions_with_this_agent(tenant: Any) -> None:
    u = f"r-{uuid.uuid4().hex[:8]}"
    a1 = await tenant.new_client(role="agent", agent_id="r1")
    a2 = await tenant.new_client(role="agent", agent_id="r2")
    await user_session(a1, u, None, "my parcel zx81 was left at the blue door", "noted")
    await user_session(a2, u, None, "parcel zx81 secret for r2 only", "ok")
    await user_session(a1, f"other-{u}", None, "parcel zx81 of another person", "ok")
    sid = await user_session(a1, u, None, "where is parcel zx81 now?", user_recall={"share": 0.2})
    r = await a1.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})
    assert r.status_code == 200, r.text
    text = json.dumps(r.json())
    assert "Earlier conversations with this user" in text
    assert "blue door" in text
    assert "r2 only" not in text and "another person" not in text
    assert r.json()["total_tokens"] <= r.json()["budget"]
    plain = await user_session(a1, u, None, "where is parcel zx81 now?")
    r = await a1.post(f"/v1/sessions/{plain}/context", json={"format": "raw"})
    assert "Earlier conversations" not in json.dumps(r.json())

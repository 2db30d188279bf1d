import uuid

import sqlalchemy as sa

from tests.support.api import new_session


async def test_create_get_list_update_delete_session(client, db):
    resp = await client.post(
        "/v1/sessions", json={"metadata": {"k": "v"}, "config": {"max_context_tokens": 8000}}
    )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    sid = body["id"]
    assert body["agent_id"] == "agent-1"
    assert body["config"]["max_context_tokens"] == 8000
    assert body["budget"] == 8000 - 800  # reserve scales to 10% of a small window
    assert body["message_count"] == 0

    row = (
        await db.execute(
            sa.text("select agent_id, metadata from sessions where id = :i"), {"i": sid}
        )
    ).one()
    assert row.agent_id == "agent-1" and row.metadata == {"k": "v"}

    got = await client.get(f"/v1/sessions/{sid}")
    assert got.status_code == 200 and got.json()["id"] == sid

    patched = await client.patch(
        f"/v1/sessions/{sid}", json={"metadata": {"k": "w"}, "config": {"l1_max_messages": 6}}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["metadata"] == {"k": "w"}
    assert patched.json()["config"]["l1_max_messages"] == 6
    assert patched.json()["config"]["max_context_tokens"] == 8000

    listed = await client.get("/v1/sessions")
    assert [s["id"] for s in listed.json()["items"]] == [sid]

    deleted = await client.delete(f"/v1/sessions/{sid}")
    assert deleted.status_code == 204
    assert (await client.get(f"/v1/sessions/{sid}")).status_code == 404
    count = (
        await db.execute(sa.text("select count(*) from sessions where id = :i"), {"i": sid})
    ).scalar()
    assert count == 0


async def test_list_paginates_with_cursor(client):
    ids = []
    for _ in range(5):
        ids.append(await new_session(client))
    seen, cursor = [], None
    while True:
        params = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/sessions", params=params)).json()
        seen += [s["id"] for s in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == ids


async def test_unknown_and_malformed_ids(client):
    r = await client.get(f"/v1/sessions/{uuid.uuid4()}")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "session_not_found"
    r = await client.get("/v1/sessions/not-a-uuid")
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "validation_error"
    assert r.json()["error"]["details"][0]["loc"] == ["path", "session_id"]


async def test_bad_bodies_are_422_with_field_details(client):
    r = await client.post("/v1/sessions", json={"config": {"max_context_tokens": "lots"}})
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["loc"][:3] == ["body", "config", "max_context_tokens"]
    r = await client.post(
        "/v1/sessions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    r = await client.post(
        "/v1/sessions",
        json={"config": {"max_context_tokens": 1000, "reserved_output_tokens": 1000}},
    )
    assert r.status_code == 422
    r = await client.get("/v1/sessions", params={"cursor": "%%%garbage"})
    assert r.status_code == 400


async def test_service_key_without_agent_is_400(tenant):
    c = tenant.client_for(tenant.service_key)
    r = await c.post("/v1/sessions", json={})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "agent_required"
    r = await c.post("/v1/sessions", json={"agent_id": "planner"})
    assert r.status_code == 201 and r.json()["agent_id"] == "planner"


async def test_agent_key_sees_only_its_sessions(tenant):
    svc = tenant.client_for(tenant.service_key)
    other = (await svc.post("/v1/sessions", json={"agent_id": "other"})).json()["id"]
    agent = await tenant.new_client(role="agent", agent_id="mine")
    mine = (await agent.post("/v1/sessions", json={})).json()
    assert mine["agent_id"] == "mine"
    assert (await agent.get(f"/v1/sessions/{other}")).status_code == 404
    listed = (await agent.get("/v1/sessions")).json()["items"]
    assert [s["id"] for s in listed] == [mine["id"]]
    assert (await agent.get("/v1/sessions", params={"agent_id": "other"})).status_code == 403

"""Deleting a session reaches the same derived data a user's erasure does (its
shared-memory scope with offloaded tool results and references), with a receipt; an
agent's private memory (knowledge tier and shared-memory namespace) is erased by its own
key or a service key, never by another agent's."""

from __future__ import annotations

import json
import uuid
from typing import Any

import sqlalchemy as sa

from tests.support.api import new_session


async def test_session_delete_takes_its_shared_memory_and_answers_a_receipt(
    client: Any, db: Any
) -> None:
    sid = await new_session(client)
    big = json.dumps([{"row": i} for i in range(20_000)])
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "q", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}],
                },
            ]
        },
    )
    assert r.status_code == 201, r.text
    ref = r.json()["messages"][1]["metadata"]["data_ref"]["id"]
    r = await client.put(
        "/v1/shared-memory/session/plan", params={"scope_id": sid}, json={"value": {"a": 1}}
    )
    assert r.status_code == 201
    r = await client.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 204
    receipt = (await client.get(r.headers["location"])).json()
    assert receipt["kind"] == "session" and receipt["status"] == "completed"
    counts = receipt["counts"]
    assert (
        counts["sessions"],
        counts["messages"],
        counts["shared_memory_entries"],
        counts["references"],
        counts["memory_states"],
    ) == (1, 2, 2, 1, 1)
    assert (await client.get(f"/v1/refs/{ref}")).status_code == 404
    n = (
        await db.execute(
            sa.text("SELECT count(*) FROM shared_memory_entries WHERE scope_id = :s"), {"s": sid}
        )
    ).scalar_one()
    assert n == 0
    assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 404


async def test_agent_memory_erasure(tenant: Any) -> None:
    a1 = await tenant.new_client(role="agent", agent_id="m1")
    a2 = await tenant.new_client(role="agent", agent_id="m2")
    service = tenant.client_for(tenant.service_key)
    for c in (a1, a2):
        r = await c.post(
            "/v1/memory-items", json={"scope": "agent", "kind": "fact", "text": "private"}
        )
        assert r.status_code == 201, r.text
        r = await c.put("/v1/shared-memory/agent/notes", json={"value": {"n": 1}})
        assert r.status_code == 201, r.text
    r = await a2.delete("/v1/agents/m1/memory")
    assert r.status_code == 403 and r.json()["error"]["code"] == "agent_mismatch"
    r = await a1.delete("/v1/agents/m1/memory")
    assert r.status_code == 200, r.text
    counts = r.json()["counts"]
    # the item written by hand starts its history with an `add` version (issue 27)
    assert (counts["facts"], counts["fact_versions"], counts["shared_memory_entries"]) == (1, 1, 1)
    assert (await a1.get(r.headers["location"])).status_code == 200
    assert (await a2.get(r.headers["location"])).status_code == 404  # not its receipt
    assert (await a1.get("/v1/shared-memory/agent/notes")).status_code == 404
    assert (await a2.get("/v1/shared-memory/agent/notes")).status_code == 200
    r = await a2.post("/v1/memory-items/query", json={"filters": {"scope": "agent"}})
    assert len(r.json()["items"]) == 1
    r = await service.delete("/v1/agents/m2/memory")
    assert r.status_code == 200 and r.json()["counts"]["facts"] == 1
    assert r.json()["erasure_id"] != str(uuid.UUID(int=0))

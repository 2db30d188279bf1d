"""Large tool results become data references; the shared_memory_* tools execute."""

import json

import sqlalchemy as sa

from app.shared_memory.tasks import cleanup_expired_shared_memory
from tests.support.api import new_session
from tests.support.worker import worker_ctx

SM = "/v1/shared-memory"


async def test_five_megabyte_tool_result_becomes_a_reference(client, db, app):
    sid = await new_session(client)
    rows = [{"id": i, "name": f"customer-{i}", "balance": i * 3.5} for i in range(90_000)]
    big = json.dumps(rows)
    assert len(big) > 5 * 1024 * 1024
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "tu_sql",
                            "name": "run_sql",
                            "input": {"q": "select"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "tu_sql", "content": big}],
                },
                {"role": "tool", "tool_call_id": "small", "content": "tiny result"},
            ]
        },
    )
    assert r.status_code == 201, r.text
    tool_msg = r.json()["messages"][1]
    ref = tool_msg["metadata"]["data_ref"]
    assert ref["id"].startswith("ref_") and ref["size_bytes"] == len(big.encode())
    assert ref["id"] in tool_msg["content"] and len(tool_msg["content"]) < 400
    assert tool_msg["token_count"] < 80  # counted on the reference, not on 5 MB
    assert "data_ref" not in r.json()["messages"][2]["metadata"]

    stored = (await client.get(f"/v1/sessions/{sid}/messages")).json()["items"][1]
    assert stored["content"] == tool_msg["content"]
    full = await client.get(f"/v1/refs/{ref['id']}")
    assert full.status_code == 200 and full.text == big
    assert full.headers["x-loom-checksum"] == f"sha256={ref['checksum']}"
    meta = (await client.get(f"/v1/refs/{ref['id']}", params={"meta": "true"})).json()
    assert meta["compressed"] is True and meta["checksum"] == ref["checksum"]

    paths = app.openapi()["paths"]
    if "/v1/sessions/{session_id}/context" in paths:
        ctx = await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})
        assert ctx.status_code == 200, ctx.text
        text = json.dumps(ctx.json())
        assert ref["id"] in text and len(text) < 100_000

    # Referenced data outlives its TTL: the holder (the message) keeps it.
    await db.execute(
        sa.text(
            "update shared_memory_entries set expires_at = now() - "
            "interval '1 hour' where ref_id = :r"
        ),
        {"r": ref["id"]},
    )
    await db.commit()
    async with worker_ctx(app.state.loom.settings) as ctx_job:
        await cleanup_expired_shared_memory(ctx_job)
    assert (await client.get(f"/v1/refs/{ref['id']}")).status_code == 200
    key = f"tool_results/{ref['id']}"
    listing = (await client.get(f"{SM}/session", params={"scope_id": sid})).json()["items"]
    assert len(listing) == 1 and listing[0]["key"].startswith("tool_results/")
    held = await client.delete(f"{SM}/session/{listing[0]['key']}", params={"scope_id": sid})
    assert held.status_code == 409 and held.json()["error"]["code"] == "entry_referenced"
    assert key  # the key is server-chosen; the reference id is what messages carry

    # Deleting the session releases the reference; the sweep then removes the data.
    assert (await client.delete(f"/v1/sessions/{sid}")).status_code in (200, 204)
    async with worker_ctx(app.state.loom.settings) as ctx_job:
        await cleanup_expired_shared_memory(ctx_job)
    assert (await client.get(f"/v1/refs/{ref['id']}")).status_code == 404


async def test_shared_memory_tools_execute_as_the_sessions_agent(tenant):
    p1 = await tenant.new_client("agent", "player1")
    p2 = await tenant.new_client("agent", "player2")
    s1 = await new_session(p1)
    s2 = await new_session(p2)

    async def call(client, sid, name, args):
        r = await client.post(
            f"/v1/sessions/{sid}/tool-calls",
            json={"type": "tool_use", "id": "t1", "name": name, "input": args},
        )
        assert r.status_code == 200, r.text
        return r.json()

    w = await call(
        p1,
        s1,
        "shared_memory_write",
        {"namespace": "agent", "key": "character_sheet", "value": {"name": "Eldrin"}},
    )
    assert not w["is_error"], w
    version = json.loads(w["content"])["version"]
    await call(
        p2,
        s2,
        "shared_memory_write",
        {"namespace": "agent", "key": "character_sheet", "value": {"name": "Luna"}},
    )
    r1 = json.loads(
        (
            await call(
                p1, s1, "shared_memory_read", {"namespace": "agent", "key": "character_sheet"}
            )
        )["content"]
    )
    assert r1["value"] == {"name": "Eldrin"}
    stale = await call(
        p1,
        s1,
        "shared_memory_write",
        {"namespace": "agent", "key": "character_sheet", "value": 1, "if_version": version - 1},
    )
    assert stale["is_error"] and json.loads(stale["content"])["error"]["code"] == "VERSION_CONFLICT"
    listed = json.loads(
        (await call(p2, s2, "shared_memory_list", {"namespace": "agent"}))["content"]
    )
    assert listed["keys"] == ["character_sheet"]
    bad = await call(p1, s1, "shared_memory_read", {"namespace": "agent", "key": "../x"})
    assert bad["is_error"]
    d = await call(p1, s1, "shared_memory_delete", {"namespace": "agent", "key": "character_sheet"})
    assert not d["is_error"]
    gone = await call(
        p1, s1, "shared_memory_read", {"namespace": "agent", "key": "character_sheet"}
    )
    assert gone["is_error"]
    got = await p2.get(f"{SM}/agent/character_sheet")
    assert got.json()["value"] == {"name": "Luna"}

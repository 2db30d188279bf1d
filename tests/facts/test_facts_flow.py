"""Issue 19 end to end through HTTP: a preference stated, later changed, and an unrelated
fact become one ADD, one INVALIDATE (with superseded_by) and one ADD; a new session of the
agent gets the current fact in its context and not the old one; the history route shows
the chain. Real PostgreSQL and Redis; the model is the fake Anthropic server."""

from __future__ import annotations

from typing import Any

import httpx

from tests.facts.support import PREFERENCES, FactModel, facts_session, items, say
from tests.fakes.llm_server import FakeLLMServer


async def extract(client: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await client.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true"})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_preference_changes_and_a_new_session_sees_the_current_fact(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    model = FactModel(PREFERENCES)
    fake_llm.respond_with_tools(model)
    sid = await facts_session(llm_client)

    await say(
        llm_client,
        sid,
        ("Hi! I prefer tea in the morning, green if possible.", "Noted, tea it is."),
        day=1,
    )
    first = await extract(llm_client, sid)
    assert first["result"]["added"] == 1 and first["result"]["invalidated"] == 0
    assert model.calls == ["record_facts"]  # nothing stored was close: no decision call
    [tea] = await items(llm_client)
    assert tea["text"] == "The user prefers tea in the morning."
    assert tea["scope"] == "agent/agent-1" and tea["version"] == 1
    assert tea["source_session_id"] == sid and tea["source_seqs"] == [1]
    assert tea["valid_from"].startswith("2026-03-01T09:00:00")

    await say(
        llm_client,
        sid,
        ("Actually I switched to coffee last week.", "Coffee, got it."),
        ("Also, my sister lives in Lisbon.", "Nice city!"),
        day=5,
    )
    second = await extract(llm_client, sid)
    assert (
        second["result"]["added"],
        second["result"]["invalidated"],
        second["result"]["updated"],
    ) == (2, 1, 0)  # the successor counts as added
    assert model.calls == ["record_facts", "record_facts", "decide_facts"]
    status = second["extraction"]
    assert status["status"] == "succeeded" and status["watermark_seq"] == 6
    assert status["llm_calls"] == 3 and status["llm_input_tokens"] > 0

    valid = {f["text"]: f for f in await items(llm_client)}
    assert set(valid) == {
        "The user prefers coffee in the morning.",
        "The user's sister lives in Lisbon.",
    }
    every = {f["text"]: f for f in await items(llm_client, include_invalidated=True)}
    assert len(every) == 3
    old, new = (
        every["The user prefers tea in the morning."],
        valid["The user prefers coffee in the morning."],
    )
    assert old["superseded_by"] == new["id"]
    assert old["invalid_at"].startswith("2026-03-05T09:00:00")  # the new message's time
    assert new["source_seqs"] == [3] and new["invalid_at"] is None

    # the history route shows the chain both ways
    h = (await llm_client.get(f"/v1/memory-items/{old['id']}/history")).json()
    assert [(v["version"], v["change"]) for v in h["versions"]] == [(1, "add"), (2, "invalidate")]
    assert h["superseded_by"]["id"] == new["id"] and h["item"]["invalid_at"]
    assert "msg 3" in h["versions"][1]["reason"]
    h2 = (await llm_client.get(f"/v1/memory-items/{new['id']}/history")).json()
    assert [s["id"] for s in h2["supersedes"]] == [old["id"]]

    metrics = (await llm_client.get("/metrics")).text
    for line in (
        'loom_facts_llm_calls_total{step="extract"}',
        'loom_facts_llm_calls_total{step="decide"}',
        'loom_facts_llm_tokens_total{direction="input",step="extract"}',
        'loom_facts_operations_total{op="invalidate"}',
    ):
        assert line in metrics, line

    # an extraction with nothing new reads nothing and asks nothing
    again = await extract(llm_client, sid)
    assert again["result"]["batches"] == 0 and len(model.calls) == 3

    # a new session of the same agent: the current fact in its context, not the old one
    later = (
        await llm_client.post(
            "/v1/sessions",
            json={
                "config": {"facts": {"enabled": True}},
                "rom": {"system_prompt": "You are a helpful barista."},
            },
        )
    ).json()["id"]
    r = await llm_client.post(
        f"/v1/sessions/{later}/messages",
        json={"messages": [{"role": "user", "content": "What should I drink this morning?"}]},
    )
    assert r.status_code == 201, r.text
    ctx = (await llm_client.post(f"/v1/sessions/{later}/context", json={"format": "raw"})).json()
    block = ctx["layers"]["facts"]["text"]
    assert block.startswith("## Facts remembered (agent/agent-1)")
    assert "coffee" in block and "tea" not in block and "Lisbon" in block
    assert ctx["tokens"]["facts"] == ctx["layers"]["facts"]["token_count"] > 0
    assert ctx["total_tokens"] <= ctx["budget"]
    anthropic = (await llm_client.post(f"/v1/sessions/{later}/context", json={})).json()
    system = [b["text"] for b in anthropic["system"]]
    assert system[0] == "You are a helpful barista." and system[1] == block  # after ROM
    print("\nworked example - facts block of the later session:\n" + block)


async def test_update_rewrites_the_fact_and_keeps_its_previous_version(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    from tests.facts.support import Rule

    model = FactModel(
        [
            Rule("I work at", "The user works at Acme.", "user.job", update=True),
            Rule("I lead", "The user works at Acme as head of data.", "user.job", update=True),
        ]
    )
    fake_llm.respond_with_tools(model)
    sid = await facts_session(llm_client)
    await say(llm_client, sid, ("I work at Acme.", "Cool."))
    await extract(llm_client, sid)
    await say(llm_client, sid, ("I lead the data team at Acme now.", "Congrats!"), day=2)
    result = (await extract(llm_client, sid))["result"]
    assert (result["added"], result["updated"], result["invalidated"]) == (0, 1, 0)
    [fact] = await items(llm_client)
    assert fact["text"] == "The user works at Acme as head of data." and fact["version"] == 2
    h = (await llm_client.get(f"/v1/memory-items/{fact['id']}/history")).json()
    assert [(v["version"], v["change"], v["text"]) for v in h["versions"]] == [
        (1, "add", "The user works at Acme."),
        (2, "update", "The user works at Acme as head of data."),
    ]


async def test_forget_fact_tool_invalidates_with_a_reason(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel(PREFERENCES))
    sid = await facts_session(llm_client)
    await say(llm_client, sid, ("I prefer tea, thanks.", "Sure."))
    await extract(llm_client, sid)
    tools = (await llm_client.get(f"/v1/sessions/{sid}/tools", params={"format": "openai"})).json()
    assert {"search_facts", "forget_fact"} <= {t["function"]["name"] for t in tools["tools"]}

    async def call(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        import json

        r = await llm_client.post(
            f"/v1/sessions/{sid}/tool-calls",
            json={"type": "tool_use", "id": "toolu_1", "name": name, "input": args},
        )
        assert r.status_code == 200, r.text
        block = r.json()
        return bool(block.get("is_error")), json.loads(block["content"])

    err, found = await call("search_facts", {"query": "tea"})
    assert not err and [f["text"] for f in found["facts"]] == [
        "The user prefers tea in the morning."
    ]
    fid = found["facts"][0]["id"]
    err, out = await call("forget_fact", {"id": fid, "reason": "the user said it was a joke"})
    assert not err and out["version"] == 2
    assert (await call("search_facts", {"query": "tea"}))[1]["facts"] == []
    assert (
        len((await call("search_facts", {"query": "tea", "include_invalidated": True}))[1]["facts"])
        == 1
    )
    err, out = await call("forget_fact", {"id": fid, "reason": "again"})
    assert err and out["error"]["code"] == "FACT_ALREADY_INVALID"
    h = (await llm_client.get(f"/v1/memory-items/{fid}/history")).json()
    assert h["versions"][-1]["change"] == "forget"
    assert h["versions"][-1]["reason"] == "the user said it was a joke"


async def test_no_llm_records_skipped_and_makes_nothing_up(client: httpx.AsyncClient) -> None:
    sid = await facts_session(client)
    await say(client, sid, ("I prefer tea.", "ok"))
    r = await client.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["result"]["skipped"] == "no_llm"
    assert body["extraction"]["status"] == "skipped"
    assert body["extraction"]["skipped"] == "no_llm" and body["extraction"]["watermark_seq"] == 0
    assert await items(client) == []
    metrics = (await client.get("/metrics")).text
    assert 'loom_facts_jobs_skipped_total{reason="no_llm"}' in metrics


async def test_extract_needs_facts_enabled(client: httpx.AsyncClient) -> None:
    sid = (await client.post("/v1/sessions", json={})).json()["id"]
    r = await client.post(f"/v1/sessions/{sid}/memory/extract")
    assert r.status_code == 409 and r.json()["error"]["code"] == "facts_disabled"
    assert (await client.get(f"/v1/sessions/{sid}/memory/extract")).json()["status"] == "idle"


async def test_a_fact_changed_twice_in_one_batch_chains_its_versions(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    from tests.facts.support import Rule

    model = FactModel(
        [
            Rule(f"moved to {c}", f"The user lives in {c}.", "user.home_city")
            for c in ("Porto", "Oslo", "Rome")
        ]
    )
    fake_llm.respond_with_tools(model)
    sid = await facts_session(llm_client)
    await say(llm_client, sid, ("I moved to Porto.", "ok"))
    await extract(llm_client, sid)
    await say(
        llm_client, sid, ("I moved to Oslo in May.", "ok"), ("Then I moved to Rome.", "ok"), day=9
    )
    result = (await extract(llm_client, sid))["result"]
    assert (result["added"], result["invalidated"]) == (2, 2)  # every state is recorded
    [current] = await items(llm_client)
    assert current["text"] == "The user lives in Rome."
    every = {f["text"]: f for f in await items(llm_client, include_invalidated=True)}
    porto, oslo = every["The user lives in Porto."], every["The user lives in Oslo."]
    assert porto["superseded_by"] == oslo["id"] and oslo["superseded_by"] == current["id"]

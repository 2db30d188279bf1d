"""The "knowledge" and "learned" context blocks of a session: present when configured,
within their share of the budget, counted with the tokenizer."""

from __future__ import annotations

import math
import uuid
from contextlib import nullcontext

import pytest

from app.context import blocks as registry
from app.core.tokens import count_text
from app.knowledge import blocks as knowledge_blocks
from app.sessions import repository as sessions_repo
from tests.support.api import create_session
from tests.support.sa_conn import driver_connection

LEARNED = {
    "tuned_prompts": {"system": "Answer in one sentence."},
    "signatures": {"qa": {"inputs": ["q"], "outputs": ["a"]}},
    "demonstrations": [{"q": f"question {i}", "a": "answer " * 20} for i in range(30)],
}


async def _session(client, knowledge: dict | None, max_context_tokens: int = 20_000) -> dict:
    config: dict = {"max_context_tokens": max_context_tokens}
    if knowledge is not None:
        config["knowledge"] = knowledge
    return await create_session(client, "agent-1", **config)


async def _items(client) -> None:
    for scope, text, imp in [
        ("project/p1", "Decision: use PostgreSQL for everything", 0.9),
        ("project/p2", "SECRET of another project", 1.0),
        ("task/t1", "Step 2 failed: retry with backoff", 0.7),
        ("global", "The user prefers terse answers", 0.8),
    ]:
        r = await client.post(
            "/v1/memory-items",
            json={"scope": scope, "kind": "note", "text": text, "importance": imp},
        )
        assert r.status_code == 201
    for i in range(200):  # more than the share can hold
        await client.post(
            "/v1/memory-items",
            json={
                "scope": "project/p1",
                "kind": "filler",
                "text": f"filler note {i} " * 10,
                "importance": 0.1,
            },
        )


async def _blocks(db, tenant, session: dict, budget: int) -> dict[str, registry.ContextBlock]:
    conn = await driver_connection(db)
    row = await sessions_repo.get(conn, uuid.UUID(tenant.id), uuid.UUID(session["id"]))
    assert row is not None
    providers = (knowledge_blocks.knowledge_provider, knowledge_blocks.learned_provider)
    return {
        b.name: b for b in await registry.collect(lambda: nullcontext(conn), row, budget, providers)
    }


async def test_blocks_appear_within_their_share(client, tenant, db) -> None:
    await _items(client)
    assert (await client.put("/v1/agents/agent-1/learned", json=LEARNED)).status_code == 200
    s = await _session(
        client,
        {"project_id": "p1", "task_id": "t1", "share": 0.1, "learned": True, "learned_share": 0.05},
    )
    got = await _blocks(db, tenant, s, s["budget"])
    know, learned = got["knowledge"], got["learned"]
    assert know.token_count == count_text(know.text) <= math.floor(s["budget"] * 0.1)
    assert "use PostgreSQL" in know.text and "retry with backoff" in know.text
    assert "terse answers" in know.text and "another project" not in know.text
    assert know.text.startswith("Knowledge (task/t1, project/p1, global):")
    assert learned.token_count == count_text(learned.text) <= math.floor(s["budget"] * 0.05)
    assert "Learned optimizations (version 1)" in learned.text
    assert "Answer in one sentence." in learned.text


async def test_blocks_respect_the_free_budget(client, tenant, db) -> None:
    await _items(client)
    await client.put("/v1/agents/agent-1/learned", json=LEARNED)
    s = await _session(
        client, {"project_id": "p1", "share": 1.0, "learned": True, "learned_share": 1.0}
    )
    for free in (0, 5, 40, 300):
        got = await _blocks(db, tenant, s, free)
        assert sum(b.token_count for b in got.values()) <= free
        for b in got.values():
            assert b.token_count == count_text(b.text)


async def test_rollback_changes_the_learned_block(client, tenant, db) -> None:
    await client.put("/v1/agents/agent-1/learned", json={"tuned_prompts": {"s": "old prompt"}})
    await client.put("/v1/agents/agent-1/learned", json={"tuned_prompts": {"s": "new prompt"}})
    s = await _session(client, {"learned": True})
    assert "new prompt" in (await _blocks(db, tenant, s, 5000))["learned"].text
    await client.post("/v1/agents/agent-1/learned/rollback")
    text = (await _blocks(db, tenant, s, 5000))["learned"].text
    assert "old prompt" in text and "version 1" in text


@pytest.mark.parametrize("knowledge", [None, {}, {"learned": False}])
async def test_no_blocks_unless_configured(client, tenant, db, knowledge) -> None:
    await _items(client)
    await client.put("/v1/agents/agent-1/learned", json=LEARNED)
    s = await _session(client, knowledge)
    assert await _blocks(db, tenant, s, 10_000) == {}


async def test_session_knowledge_config_is_validated(client) -> None:
    r = await client.post(
        "/v1/sessions",
        json={"agent_id": "agent-1", "config": {"knowledge": {"project_id": "bad/id"}}},
    )
    assert r.status_code == 422
    r = await client.post(
        "/v1/sessions", json={"agent_id": "agent-1", "config": {"knowledge": {"share": 2}}}
    )
    assert r.status_code == 422


async def test_blocks_in_the_built_context_within_budget(client) -> None:
    await _items(client)
    await client.put("/v1/agents/agent-1/learned", json=LEARNED)
    s = await _session(
        client,
        {"project_id": "p1", "task_id": "t1", "share": 0.2, "learned": True, "learned_share": 0.1},
        max_context_tokens=4000,
    )
    msgs = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 30}
        for i in range(12)
    ]
    r = await client.post(f"/v1/sessions/{s['id']}/messages", json={"messages": msgs})
    assert r.status_code in (200, 201), r.text
    r = await client.post(f"/v1/sessions/{s['id']}/context", json={"format": "raw"})
    assert r.status_code == 200, r.text
    ctx = r.json()
    blocks = {b["name"]: b for b in ctx["layers"]["blocks"]}
    assert set(blocks) == {"knowledge", "learned"}
    assert "use PostgreSQL" in blocks["knowledge"]["text"]
    assert "Learned optimizations (version 1)" in blocks["learned"]["text"]
    assert blocks["knowledge"]["token_count"] <= math.floor(s["budget"] * 0.2)
    assert blocks["learned"]["token_count"] <= math.floor(s["budget"] * 0.1)
    assert ctx["tokens"]["blocks"] == sum(b["token_count"] for b in blocks.values())
    assert ctx["total_tokens"] <= ctx["budget"] == s["budget"]
    r = await client.post(f"/v1/sessions/{s['id']}/context", json={"format": "anthropic"})
    system_text = "".join(b.get("text", "") for b in r.json()["system"] or [])
    assert "use PostgreSQL" in system_text and "Learned optimizations" in system_text

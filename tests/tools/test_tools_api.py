"""Built-in agent tools through HTTP: definitions, and each tool valid and invalid."""

import json
import uuid

from tests.search.support import append, compressed_session, over_budget_session
from tests.support.api import new_session

BUILTIN = {
    "recall_conversation",
    "search_conversation",
    "clear_recalled_context",
    "shared_memory_read",
    "shared_memory_write",
    "shared_memory_list",
    "shared_memory_delete",
    "search_facts",
    "forget_fact",
}


async def call(client, sid, name, tool_input, tool_id="toolu_1"):
    resp = await client.post(
        f"/v1/sessions/{sid}/tool-calls",
        json={"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
    )
    assert resp.status_code == 200, resp.text
    block = resp.json()
    assert block["type"] == "tool_result" and block["tool_use_id"] == tool_id
    return block, json.loads(block["content"])


def error_code(block, content):
    assert block["is_error"] is True, content
    return content["error"]["code"]


async def test_tool_definitions(client):
    sid = await new_session(client)
    resp = await client.get(f"/v1/sessions/{sid}/tools")
    assert resp.status_code == 200
    tools = resp.json()["tools"]
    assert {t["name"] for t in tools} >= BUILTIN
    for tool in tools:
        assert tool["description"] and tool["input_schema"]["type"] == "object"
    search = next(t for t in tools if t["name"] == "search_conversation")
    props = search["input_schema"]["properties"]
    assert props["promote"]["default"] is True and props["limit"]["maximum"] == 20
    recall = next(t for t in tools if t["name"] == "recall_conversation")
    assert recall["input_schema"]["properties"]["limit"]["maximum"] == 50


async def test_tool_definitions_openai_format(client):
    sid = await new_session(client)
    anthropic_tools = (await client.get(f"/v1/sessions/{sid}/tools")).json()["tools"]
    explicit = await client.get(f"/v1/sessions/{sid}/tools", params={"format": "anthropic"})
    assert explicit.status_code == 200 and explicit.json()["tools"] == anthropic_tools
    resp = await client.get(f"/v1/sessions/{sid}/tools", params={"format": "openai"})
    assert resp.status_code == 200, resp.text
    tools = resp.json()["tools"]
    # the same tools in the same order, as OpenAI function tools
    assert tools == [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t["description"],
                "parameters": t["input_schema"],
            },
        }
        for t in anthropic_tools
    ]
    bad = await client.get(f"/v1/sessions/{sid}/tools", params={"format": "gemini"})
    assert bad.status_code == 422
    error = bad.json()["error"]
    assert error["code"] == "validation_error"
    assert error["details"][0]["loc"] == ["query", "format"]


async def test_recall_conversation(client):
    sid = await new_session(client)
    await append(client, sid, [f"line {i}" for i in range(1, 13)])
    block, content = await call(client, sid, "recall_conversation", {"offset": 2, "limit": 3})
    assert block["is_error"] is False
    assert [m["seq"] for m in content["messages"]] == [3, 4, 5]
    assert content["messages"][0] == {"seq": 3, "role": "user", "text": "line 3"}
    assert content["has_more"] is True and content["total_messages"] == 12
    _, content = await call(client, sid, "recall_conversation", {"offset": 10})
    assert [m["seq"] for m in content["messages"]] == [11, 12] and content["has_more"] is False


async def test_recall_conversation_invalid(client):
    sid = await new_session(client)
    for bad in [
        {"limit": 51},
        {"limit": 0},
        {"offset": -1},
        {"offset": "soon"},
        {"unknown": 1},
        "not an object",
        [1, 2],
    ]:
        block, content = await call(client, sid, "recall_conversation", bad)
        assert error_code(block, content) == "INVALID_PARAMETER", bad


async def test_recall_with_promote(client):
    sid, mem = await compressed_session(client)
    assert mem["l1_start_seq"] > 3
    block, content = await call(
        client, sid, "recall_conversation", {"offset": 0, "limit": 3, "promote": True}
    )
    assert block["is_error"] is False, content
    assert content["promoted_seqs"] == [1, 2, 3]
    memory = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert memory["promoted_seqs"] == [1, 2, 3]


async def test_search_conversation(client):
    sid = await new_session(client)
    await append(client, sid, ["we chose postgres for the ledger", "lunch was great"])
    block, content = await call(
        client, sid, "search_conversation", {"query": "ledger database postgres", "promote": False}
    )
    assert block["is_error"] is False
    # The match first, then its neighbour (ranked with the turns around it).
    assert [r["seq"] for r in content["results"]] == [1, 2]
    assert content["results"][0]["text"] == "we chose postgres for the ledger"
    assert content["reranked"] is False and content["promoted_seqs"] == []
    # Empty and stop-word queries are not errors.
    block, content = await call(client, sid, "search_conversation", {"query": "the"})
    assert block["is_error"] is False and content["results"] == []


async def test_search_conversation_scopes(client, tenant):
    mine = await new_session(client, "agent-1")
    sibling = await new_session(client, "agent-1")
    other = await new_session(client, "agent-2")
    for sid in (mine, sibling, other):
        await append(client, sid, ["the aurora borealis sighting"])
    _, content = await call(
        client, mine, "search_conversation", {"query": "aurora", "scope": "agent", "promote": False}
    )
    assert sorted(r["session_id"] for r in content["results"]) == sorted([mine, sibling])
    _, content = await call(
        client,
        mine,
        "search_conversation",
        {"query": "aurora", "scope": "tenant", "promote": False},
    )
    assert len(content["results"]) == 3
    agent = await tenant.new_client(role="agent", agent_id="agent-1")
    block, content = await call(
        agent, mine, "search_conversation", {"query": "aurora", "scope": "tenant"}
    )
    assert error_code(block, content) == "FORBIDDEN"


async def test_search_conversation_invalid(client):
    sid = await new_session(client)
    for bad in [
        {},
        {"query": 42},
        {"query": "x", "limit": 21},
        {"query": "x", "scope": "galaxy"},
        {"query": "x", "promote": "perhaps"},
        {"query": "x" * 10_001},
    ]:
        block, content = await call(client, sid, "search_conversation", bad)
        assert error_code(block, content) == "INVALID_PARAMETER", bad


async def test_search_conversation_promotes_and_clear_recalled_context(client):
    sid, mem = await compressed_session(client)
    block, content = await call(
        client, sid, "search_conversation", {"query": "message 3 lighthouse", "limit": 3}
    )
    assert block["is_error"] is False, content
    # seq 4 ("message 3") is in swap and gets promoted with the other hits in swap (its
    # neighbours); hits still in L1 are in the context already.
    seqs = [r["seq"] for r in content["results"]]
    in_swap = sorted(s for s in seqs if s < mem["l1_start_seq"])
    assert seqs[0] == 4 and 4 in in_swap
    assert content["promoted_seqs"] == in_swap and "promote_error" not in content
    memory = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert memory["promoted_seqs"] == in_swap
    block, content = await call(client, sid, "clear_recalled_context", {})
    assert block["is_error"] is False and content == {"cleared": len(in_swap)}
    block, content = await call(client, sid, "clear_recalled_context", {})
    assert content == {"cleared": 0}
    memory = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert memory["promoted_seqs"] == []


async def test_search_conversation_over_budget_still_answers(client):
    sid = await over_budget_session(client)
    block, content = await call(client, sid, "search_conversation", {"query": "zebra"})
    assert block["is_error"] is False
    assert len(content["results"]) == 10
    assert content["promoted_seqs"] == []
    assert content["promote_error"]["code"] == "OVER_BUDGET"
    block, content = await call(
        client, sid, "recall_conversation", {"offset": 0, "limit": 10, "promote": True}
    )
    assert error_code(block, content) == "OVER_BUDGET"
    memory = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert memory["promoted_seqs"] == []


async def test_clear_recalled_context_invalid(client):
    sid = await new_session(client)
    block, content = await call(client, sid, "clear_recalled_context", {"all": True})
    assert error_code(block, content) == "INVALID_PARAMETER"


async def test_unknown_tool_and_bad_blocks(client):
    sid = await new_session(client)
    block, content = await call(client, sid, "launch_rockets", {})
    assert error_code(block, content) == "UNKNOWN_TOOL"
    assert "search_conversation" in content["error"]["details"]["available"]
    block, content = await call(client, sid, "search_conversation", None)
    assert error_code(block, content) == "INVALID_PARAMETER"  # missing query
    resp = await client.post(f"/v1/sessions/{sid}/tool-calls", json={"name": "x"})
    assert resp.status_code == 422  # not a tool_use block at all (no id)


async def test_tool_call_on_missing_session_is_404(client):
    resp = await client.post(
        f"/v1/sessions/{uuid.uuid4()}/tool-calls",
        json={"type": "tool_use", "id": "t", "name": "recall_conversation", "input": {}},
    )
    assert resp.status_code == 404


async def test_shared_memory_tools_answer_a_tool_result(client):
    sid = await new_session(client)
    block, content = await call(
        client, sid, "shared_memory_write", {"namespace": "agent", "key": "k", "value": {"a": 1}}
    )
    assert block["is_error"] is False, content
    block, content = await call(
        client, sid, "shared_memory_read", {"namespace": "agent", "key": "k"}
    )
    assert block["is_error"] is False, content
    block, content = await call(client, sid, "shared_memory_read", {"namespace": "nowhere"})
    assert error_code(block, content) == "INVALID_PARAMETER"


async def test_failing_handlers_become_error_results_not_5xx(client, app):
    from app.state import app_state
    from app.tools.catalog import ToolCatalog

    catalog = app_state(app).parts[ToolCatalog]

    async def boom(ctx, args):
        raise RuntimeError("secret internals")

    async def bad_sql(ctx, args):
        await ctx.db.execute("SELECT * FROM no_such_table")

    for name, handler in [("test_boom", boom), ("test_bad_sql", bad_sql)]:
        catalog.register_tool(name, {"description": "t", "input_schema": {"type": "object"}})
        catalog.register_handler(name, handler)
    # A definition without a handler (e.g. a provider module not installed).
    catalog.register_tool(
        "test_unavailable", {"description": "t", "input_schema": {"type": "object"}}
    )
    try:
        sid = await new_session(client)
        await append(client, sid, ["one message"])
        block, content = await call(client, sid, "test_boom", {})
        assert error_code(block, content) == "INTERNAL_ERROR"
        assert "secret" not in block["content"]
        # A failed statement is rolled back to the tool's savepoint: the request commits.
        block, content = await call(client, sid, "test_bad_sql", {})
        assert error_code(block, content) == "INTERNAL_ERROR"
        block, content = await call(client, sid, "test_unavailable", {})
        assert error_code(block, content) == "TOOL_UNAVAILABLE"
        _, content = await call(client, sid, "recall_conversation", {})
        assert [m["seq"] for m in content["messages"]] == [1]
    finally:
        for name in ("test_boom", "test_bad_sql", "test_unavailable"):
            catalog.remove(name)


async def test_search_conversation_bounds_times_and_shows_them(client):
    sid = await new_session(client)
    resp = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "the ledger migration plan", "created_at": t}
                for t in ("2023-01-01T00:00:00Z", "2023-06-01T00:00:00Z")
            ]
        },
    )
    assert resp.status_code == 201, resp.text
    block, content = await call(
        client,
        sid,
        "search_conversation",
        {"query": "ledger migration", "promote": False, "after": "2023-03-01T00:00:00Z"},
    )
    assert block["is_error"] is False, content
    assert [r["seq"] for r in content["results"]] == [2]
    assert content["results"][0]["created_at"].startswith("2023-06-01T00:00:00")
    block, content = await call(
        client, sid, "search_conversation", {"query": "ledger", "after": "2023-03-01"}
    )
    assert block["is_error"] is True

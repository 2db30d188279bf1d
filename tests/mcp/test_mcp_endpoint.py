"""The MCP server at /mcp, end to end: the official `mcp` client (Streamable HTTP transport
and `ClientSession`) against a live API process, checked against REST (httpx) on the same
server: the tool list, every tool with what it returned and what it stored, errors as tool
results carrying the REST code, isolation between agents and tenants, and auth refused
exactly as REST refuses it."""

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from app.core.config import Settings
from tests.support.live import live_api

pytestmark = pytest.mark.slow

TOOLS = {
    "search_memory",
    "recall_conversation",
    "clear_recalled_context",
    "append_messages",
    "get_context",
    "shared_memory_get",
    "shared_memory_put",
    "shared_memory_list",
    "shared_memory_delete",
    "knowledge_add_item",
    "knowledge_query_items",
    "knowledge_build_package",
    "search_facts",
    "forget_fact",
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def base_url(settings: Settings) -> Iterator[str]:
    """One live API process (no worker, no LLM: BM25 order, heuristic summaries)."""
    with live_api(settings, LOOM_LLM_PROVIDER="none") as base:
        yield base


@dataclass
class Tenant:
    base: str
    id: str
    service_key: str
    admin: httpx.AsyncClient

    async def key(self, role: str = "agent", agent_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"tenant_id": self.id, "role": role}
        if agent_id is not None:
            body["agent_id"] = agent_id
        resp = await self.admin.post("/v1/api-keys", json=body)
        assert resp.status_code == 201, resp.text
        return dict(resp.json())

    def rest(self, key: str, **headers: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base, timeout=30, headers={"Authorization": f"Bearer {key}", **headers}
        )


@pytest.fixture
async def tenant(base_url: str, settings: Settings) -> AsyncIterator[Tenant]:
    assert settings.admin_key is not None
    async with httpx.AsyncClient(
        base_url=base_url,
        timeout=30,
        headers={"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"},
    ) as admin:
        resp = await admin.post("/v1/tenants", json={"name": f"mcp-{uuid.uuid4().hex[:8]}"})
        assert resp.status_code == 201, resp.text
        tid = resp.json()["id"]
        key = await admin.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
        assert key.status_code == 201, key.text
        yield Tenant(base_url, tid, key.json()["secret"], admin)


@asynccontextmanager
async def mcp(base: str, key: str, **headers: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on /mcp with `key` (and extra headers)."""
    async with (
        httpx2.AsyncClient(
            timeout=30, headers={"Authorization": f"Bearer {key}", **headers}
        ) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(session: ClientSession, tool: str, **args: Any) -> Any:
    """A successful call's JSON (its text and its structured content agree)."""
    result = await session.call_tool(tool, args)
    assert not result.is_error, text(result)
    data = json.loads(text(result))
    assert result.structured_content == data
    return data


async def fail(session: ClientSession, tool: str, **args: Any) -> str:
    """A failed call's text (a tool result, not a protocol error); `code: message`."""
    result = await session.call_tool(tool, args)
    assert result.is_error, text(result)
    assert result.structured_content is not None
    code = result.structured_content["error"]["code"]
    assert text(result).startswith(f"{code}: ")
    return text(result)


async def new_session(rest: httpx.AsyncClient, agent_id: str, **config: Any) -> str:
    resp = await rest.post("/v1/sessions", json={"agent_id": agent_id, "config": config})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


async def test_tool_list(tenant: Tenant) -> None:
    async with mcp(tenant.base, tenant.service_key, **{"X-Agent-Id": "a1"}) as session:
        tools = (await session.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.description and len(tool.description) > 60, tool.name
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["properties"], tool.name
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
        assert tool.annotations is not None
    by_name = {t.name: t for t in tools}
    assert by_name["shared_memory_put"].input_schema["required"] == ["namespace", "key", "value"]
    read_only = {t.name for t in tools if t.annotations and t.annotations.read_only_hint}
    assert read_only == {
        "get_context",
        "shared_memory_get",
        "shared_memory_list",
        "knowledge_query_items",
        "knowledge_build_package",
        "search_facts",
    }


async def test_conversation_tools(tenant: Tenant) -> None:
    agent_key = (await tenant.key("agent", "a1"))["secret"]
    async with tenant.rest(agent_key) as rest, mcp(tenant.base, agent_key) as session:
        # two messages in L1: the older ones can be promoted back into the context
        sid = await new_session(rest, "a1", l1_max_messages=2)
        other = await new_session(rest, "a1")
        turns = [
            {"role": "user", "content": "Which database for the billing service?"},
            {"role": "assistant", "content": "We chose PostgreSQL for billing."},
            {"role": "user", "content": "And the cache?"},
            {"role": "assistant", "content": "Redis, with a one hour TTL."},
        ]
        appended = await call(
            session, "append_messages", session_id=sid, messages=turns, idempotency_key="turns-1"
        )
        assert appended["last_seq"] == 4 and not appended["replayed"]
        again = await call(
            session, "append_messages", session_id=sid, messages=turns, idempotency_key="turns-1"
        )
        assert again["replayed"] and again["last_seq"] == 4
        await call(
            session,
            "append_messages",
            session_id=other,
            messages=[{"role": "user", "content": "The billing invoices go out monthly."}],
        )
        stored = (await rest.get(f"/v1/sessions/{sid}/messages")).json()["items"]
        assert [(m["seq"], m["content"]) for m in stored] == [
            (i + 1, t["content"]) for i, t in enumerate(turns)
        ]

        one = await call(
            session, "search_memory", query="billing database", session_id=sid, limit=2
        )
        rest_one = (
            await rest.post(
                f"/v1/sessions/{sid}/search", json={"query": "billing database", "limit": 2}
            )
        ).json()
        assert one == rest_one and one["results"][0]["session_id"] == sid
        every = await call(session, "search_memory", query="billing")
        assert {r["session_id"] for r in every["results"]} == {sid, other}
        assert every == (await rest.post("/v1/search", json={"query": "billing"})).json()

        promoted = await call(
            session, "search_memory", query="PostgreSQL", session_id=sid, limit=1, promote=True
        )
        assert promoted["promoted_seqs"] == [2]
        assert (await rest.get(f"/v1/sessions/{sid}/memory")).json()["promoted_seqs"] == [2]
        assert await call(session, "clear_recalled_context", session_id=sid) == {"cleared": 1}
        assert (await rest.get(f"/v1/sessions/{sid}/memory")).json()["promoted_seqs"] == []

        recalled = await call(session, "recall_conversation", session_id=sid, offset=1, limit=2)
        assert [(m["seq"], m["text"]) for m in recalled["messages"]] == [
            (2, turns[1]["content"]),
            (3, turns[2]["content"]),
        ]
        assert recalled["total_messages"] == 4 and recalled["has_more"]

        for fmt in ("anthropic", "openai"):
            built = await call(session, "get_context", session_id=sid, format=fmt)
            same = (await rest.post(f"/v1/sessions/{sid}/context", json={"format": fmt})).json()
            # every build has its own context_id (issue 30); the rest is the same
            assert built.pop("context_id") != same.pop("context_id")
            assert built == same
        openai = await call(session, "get_context", session_id=sid, format="openai")
        assert openai["messages"][-1] == {
            "role": "assistant",
            "content": "Redis, with a one hour TTL.",
        }
        recall = await call(
            session,
            "get_context",
            session_id=sid,
            recall={"query": "PostgreSQL", "max_messages": 2},
        )
        assert recall["format"] == "anthropic" and "recall" in recall


async def test_shared_memory_tools(tenant: Tenant) -> None:
    async with (
        tenant.rest(tenant.service_key, **{"X-Agent-Id": "a1"}) as rest,
        mcp(tenant.base, tenant.service_key, **{"X-Agent-Id": "a1"}) as session,
    ):
        put = await call(
            session,
            "shared_memory_put",
            namespace="workflow",
            scope_id="wf-1",
            key="plan/status",
            value={"phase": 1},
            metadata={"by": "mcp"},
        )
        assert put["created"] and put["key"] == "plan/status"
        got = await call(
            session, "shared_memory_get", namespace="workflow", scope_id="wf-1", key="plan/status"
        )
        assert got["value"] == {"phase": 1} and got["version"] == put["version"]
        assert got["metadata"] == {"by": "mcp"}
        via_rest = (
            await rest.get("/v1/shared-memory/workflow/plan/status", params={"scope_id": "wf-1"})
        ).json()
        assert via_rest["value"] == {"phase": 1} and via_rest["version"] == put["version"]

        updated = await call(
            session,
            "shared_memory_put",
            namespace="workflow",
            scope_id="wf-1",
            key="plan/status",
            value={"phase": 2},
            if_version=put["version"],
        )
        assert not updated["created"] and updated["version"] > put["version"]
        stale = await fail(
            session,
            "shared_memory_put",
            namespace="workflow",
            scope_id="wf-1",
            key="plan/status",
            value={"phase": 3},
            if_version=put["version"],
        )
        assert stale.startswith("version_conflict: ")
        assert json.loads(stale.split("\n", 1)[1])["current_version"] == updated["version"]

        # the agent namespace is the caller's agent's, as on REST
        await call(session, "shared_memory_put", namespace="agent", key="notes", value="hi")
        mine = (await rest.get("/v1/shared-memory/agent/notes")).json()
        assert mine["value"] == "hi" and mine["scope_id"] == "a1"
        await call(session, "shared_memory_put", namespace="global", key="motd", value=[1, 2])

        listed = await call(
            session, "shared_memory_list", namespace="workflow", scope_id="wf-1", prefix="plan/"
        )
        assert [i["key"] for i in listed["items"]] == ["plan/status"]
        assert (
            listed
            == (
                await rest.get(
                    "/v1/shared-memory/workflow", params={"scope_id": "wf-1", "prefix": "plan/"}
                )
            ).json()
        )

        deleted = await call(
            session,
            "shared_memory_delete",
            namespace="workflow",
            scope_id="wf-1",
            key="plan/status",
        )
        assert deleted["deleted_version"] == updated["version"]
        assert (
            await rest.get("/v1/shared-memory/workflow/plan/status", params={"scope_id": "wf-1"})
        ).status_code == 404
        gone = await fail(
            session, "shared_memory_get", namespace="workflow", scope_id="wf-1", key="plan/status"
        )
        assert gone.startswith("entry_not_found: ")


async def test_knowledge_tools(tenant: Tenant) -> None:
    async with (
        tenant.rest(tenant.service_key, **{"X-Agent-Id": "a1"}) as rest,
        mcp(tenant.base, tenant.service_key, **{"X-Agent-Id": "a1"}) as session,
    ):
        item = await call(
            session,
            "knowledge_add_item",
            scope="project/checkout",
            kind="decision",
            text="Payments retry three times.",
            tags=["payments"],
            importance=0.9,
        )
        assert item["source"] == "a1" and item["token_cost"] > 0
        await call(
            session,
            "knowledge_add_item",
            scope="global",
            kind="fact",
            text="All amounts are in cents.",
        )
        await call(
            session,
            "knowledge_add_item",
            scope="task/t-7",
            kind="todo",
            payload={"step": "wire the retry"},
            importance=0.2,
        )
        assert (await rest.get(f"/v1/memory-items/{item['id']}")).json() == item

        found = await call(
            session,
            "knowledge_query_items",
            filters={"scope": "project/checkout", "importance": {"$gte": 0.5}},
        )
        assert [i["id"] for i in found["items"]] == [item["id"]]
        assert (
            found
            == (
                await rest.post(
                    "/v1/memory-items/query",
                    json={"filters": {"scope": "project/checkout", "importance": {"$gte": 0.5}}},
                )
            ).json()
        )

        package = await call(
            session,
            "knowledge_build_package",
            budget_tokens=500,
            task_id="t-7",
            project_id="checkout",
        )
        assert [(i["tier"], i["kind"]) for i in package["items"]] == [
            ("task", "todo"),
            ("project", "decision"),
            ("global", "fact"),
        ]
        assert "Payments retry three times." in package["text"]
        assert (
            package
            == (
                await rest.post(
                    "/v1/context-packages",
                    json={"budget_tokens": 500, "task_id": "t-7", "project_id": "checkout"},
                )
            ).json()
        )


async def test_errors_are_tool_results_with_the_rest_code(tenant: Tenant) -> None:
    async with (
        tenant.rest(tenant.service_key, **{"X-Agent-Id": "a1"}) as rest,
        mcp(tenant.base, tenant.service_key, **{"X-Agent-Id": "a1"}) as session,
    ):
        sid = await new_session(rest, "a1")
        missing = str(uuid.uuid4())
        for tool, args in (
            ("get_context", {}),
            ("recall_conversation", {}),
            ("clear_recalled_context", {}),
            ("search_memory", {"query": "x"}),
            ("append_messages", {"messages": [{"role": "user", "content": "hi"}]}),
        ):
            assert await fail(session, tool, session_id=missing, **args) == (
                "session_not_found: No such session."
            ), tool
        rest_404 = (await rest.post(f"/v1/sessions/{missing}/context")).json()["error"]
        assert (rest_404["code"], rest_404["message"]) == ("session_not_found", "No such session.")

        assert (await fail(session, "get_context", session_id="not-a-uuid")).startswith(
            "validation_error: "
        )
        assert (await fail(session, "append_messages", session_id=sid)).startswith(
            "validation_error: "
        )  # messages is required
        bad_role = await fail(
            session, "append_messages", session_id=sid, messages=[{"role": "robot", "content": "x"}]
        )
        assert bad_role.startswith("validation_error: ")
        assert await fail(session, "search_memory", query="x", promote=True) == (
            "validation_error: promote needs session_id: results are promoted into one "
            "session's context."
        )
        assert (
            await fail(
                session, "shared_memory_put", namespace="agent", key="k", scope_id="s", value=1
            )
        ).startswith("invalid_scope: ")
        assert (await fail(session, "shared_memory_get", namespace="workflow", key="k")).startswith(
            "invalid_scope: "
        )
        assert (
            await fail(session, "shared_memory_put", namespace="global", key="a//b", value=1)
        ).startswith("invalid_key: ")
        assert (await fail(session, "knowledge_query_items", filters={"colour": "red"})).startswith(
            "invalid_query: "
        )
        assert (
            await fail(session, "knowledge_add_item", scope="project/x", kind="fact")
        ).startswith("validation_error: ")  # no text/payload
        assert (await fail(session, "no_such_tool")).startswith("unknown_tool: ")
        # the session still works after every failure
        assert (
            await call(
                session,
                "append_messages",
                session_id=sid,
                messages=[{"role": "user", "content": "still here"}],
            )
        )["last_seq"] == 1

    # a service key that names no agent: what needs one says so, as REST does
    async with mcp(tenant.base, tenant.service_key) as session:
        assert (await fail(session, "search_memory", query="x")).startswith("agent_required: ")
        assert (await fail(session, "shared_memory_get", namespace="agent", key="k")).startswith(
            "agent_id_required: "
        )


async def test_isolation_between_agents_and_tenants(
    tenant: Tenant, base_url: str, settings: Settings
) -> None:
    a1 = (await tenant.key("agent", "a1"))["secret"]
    a2 = (await tenant.key("agent", "a2"))["secret"]
    async with tenant.rest(a1) as rest1, mcp(base_url, a1) as s1, mcp(base_url, a2) as s2:
        sid = await new_session(rest1, "a1")
        await call(
            s1,
            "append_messages",
            session_id=sid,
            messages=[{"role": "user", "content": "the vault code is swordfish"}],
        )
        await call(s1, "shared_memory_put", namespace="agent", key="secret", value="swordfish")

        for tool, args in (
            ("get_context", {}),
            ("recall_conversation", {}),
            ("clear_recalled_context", {}),
            ("search_memory", {"query": "vault"}),
            ("append_messages", {"messages": [{"role": "user", "content": "mine now"}]}),
        ):
            assert (await fail(s2, tool, session_id=sid, **args)).startswith(
                "session_not_found: "
            ), tool
        assert (await call(s2, "search_memory", query="vault swordfish"))["results"] == []
        assert (await fail(s2, "shared_memory_get", namespace="agent", key="secret")).startswith(
            "entry_not_found: "
        )
        assert (await call(s2, "shared_memory_list", namespace="agent"))["items"] == []
        assert (await fail(s2, "shared_memory_list", namespace="session", scope_id=sid)).startswith(
            "session_not_found: "
        )
        # a1 itself still sees everything it wrote
        assert (await call(s1, "shared_memory_get", namespace="agent", key="secret"))[
            "value"
        ] == "swordfish"

    # another tenant: the first tenant's ids do not exist there
    assert settings.admin_key is not None
    resp = await tenant.admin.post("/v1/tenants", json={"name": f"mcp-{uuid.uuid4().hex[:8]}"})
    other = await tenant.admin.post(
        "/v1/api-keys", json={"tenant_id": resp.json()["id"], "role": "service"}
    )
    other_key = other.json()["secret"]
    async with mcp(base_url, other_key, **{"X-Agent-Id": "a1"}) as s3:
        assert (await fail(s3, "get_context", session_id=sid)).startswith("session_not_found: ")
        assert (await fail(s3, "shared_memory_get", namespace="agent", key="secret")).startswith(
            "entry_not_found: "
        )
        assert (
            await fail(s3, "shared_memory_put", namespace="session", scope_id=sid, key="k", value=1)
        ).startswith("session_not_found: ")


async def test_auth_is_refused_as_rest_refuses_it(tenant: Tenant, base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as raw:

        async def both(**headers: str) -> tuple[httpx.Response, httpx.Response]:
            rest = await raw.get("/v1/sessions", headers=headers)
            over_mcp = await raw.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
            return rest, over_mcp

        for headers in (
            {},
            {"Authorization": "Bearer lm_not_a_key"},
            {"Authorization": "Basic dXNlcjpwYXNz"},
        ):
            rest, over_mcp = await both(**headers)
            assert over_mcp.status_code == rest.status_code == 401
            assert over_mcp.json() == rest.json()
            assert over_mcp.json()["error"]["code"] == "unauthorized"
            assert over_mcp.headers["www-authenticate"] == rest.headers["www-authenticate"]

        key = await tenant.key("agent", "a1")
        auth = {"Authorization": f"Bearer {key['secret']}"}
        assert (
            await raw.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **auth})
        ).status_code == 200
        # the /v1 routes' unknown-query-parameter rule is theirs, not the MCP endpoint's
        assert (
            await raw.post("/mcp?trace=1", json=INITIALIZE, headers={**MCP_HEADERS, **auth})
        ).status_code == 200
        mismatch = {**auth, "X-Agent-Id": "a2"}  # an agent key naming another agent
        rest, over_mcp = await both(**mismatch)
        assert over_mcp.status_code == rest.status_code == 403
        assert over_mcp.json() == rest.json()

        revoked = await tenant.admin.delete(
            f"/v1/api-keys/{key['id']}", params={"tenant_id": tenant.id}
        )
        assert revoked.status_code == 204
        rest, over_mcp = await both(**auth)
        assert over_mcp.status_code == rest.status_code == 401
        assert over_mcp.json() == rest.json()

        # stateless: no stream to open with GET (405, as the spec allows), no session ids
        got = await raw.get("/mcp", headers={**MCP_HEADERS, **auth})
        assert got.status_code == 405 and got.headers["allow"] == "POST"
        ok = await raw.post(
            "/mcp",
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {tenant.service_key}"},
        )
        assert ok.status_code == 200 and "mcp-session-id" not in ok.headers
        assert ok.json()["result"]["serverInfo"]["name"] == "loom-memory"
        # ...so any process can answer any request: a bare call needs no handshake
        bare = await raw.post(
            "/mcp",
            headers={
                **MCP_HEADERS,
                "Authorization": f"Bearer {tenant.service_key}",
                "X-Agent-Id": "a1",
            },
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "shared_memory_list", "arguments": {"namespace": "agent"}},
            },
        )
        assert bare.status_code == 200, bare.text
        result = bare.json()["result"]
        assert not result["isError"] and result["structuredContent"]["scope_id"] == "a1"


async def test_facts_tools_keep_the_agent_tier_private(tenant: Tenant) -> None:
    owner_key = (await tenant.key("agent", "fa-1"))["secret"]
    other_key = (await tenant.key("agent", "fa-2"))["secret"]
    async with tenant.rest(owner_key) as rest:
        r = await rest.post(
            "/v1/memory-items",
            json={"scope": "agent", "kind": "fact", "text": "The user is vegetarian."},
        )
        assert r.status_code == 201, r.text
        fid = r.json()["id"]
    async with mcp(tenant.base, other_key) as other:
        found = await call(other, "search_facts", query="vegetarian", include_invalidated=True)
        assert found["items"] == []
        assert (await fail(other, "forget_fact", id=fid, reason="x")).startswith(
            "memory_item_not_found"
        )
    async with mcp(tenant.base, tenant.service_key, **{"X-Agent-Id": "fa-2"}) as other:
        assert (await call(other, "search_facts", query="vegetarian"))["items"] == []
    async with mcp(tenant.base, owner_key) as own:
        found = await call(own, "search_facts", query="vegetarian food")
        assert [f["id"] for f in found["items"]] == [fid]
        forgotten = await call(own, "forget_fact", id=fid, reason="not any more")
        assert forgotten["invalid_at"] and forgotten["version"] == 2
        assert (await call(own, "search_facts", query="vegetarian"))["items"] == []


async def test_search_memory_across_a_users_sessions(tenant: Tenant) -> None:
    """`search_memory` with `user_id` searches the agent's sessions with that person
    (issue 28), as `POST /v1/search` with `scope: "user"` does; another agent: not found."""
    key = (await tenant.key("agent", "u1"))["secret"]
    user = f"mcp-user-{uuid.uuid4().hex[:6]}"
    async with tenant.rest(key) as rest, mcp(tenant.base, key) as session:
        for text_ in ("the wifi password is tulip", "tulip fields in spring"):
            r = await rest.post("/v1/sessions", json={"user_id": user})
            await rest.post(
                f"/v1/sessions/{r.json()['id']}/messages",
                json={"messages": [{"role": "user", "content": text_}]},
            )
        await new_session(rest, "u1")
        found = await call(session, "search_memory", query="tulip", user_id=user, rerank=False)
        same = await rest.post(
            "/v1/search", json={"query": "tulip", "scope": "user", "user_id": user, "rerank": False}
        )
        assert found == same.json() and len(found["results"]) == 2
    other = (await tenant.key("agent", "u2"))["secret"]
    async with mcp(tenant.base, other) as session:
        assert (await fail(session, "search_memory", query="tulip", user_id=user)).startswith(
            "user_not_found"
        )

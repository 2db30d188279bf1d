"""Session visibility (SPEC §3): whatever carries a session id is visible exactly to those
who may see that session (its agent, service keys of its tenant); anyone else gets 404 and
no byte of the data. Every entrance is tried: the session routes, the `session`
shared-memory namespace (CRUD, list, `?ref=true`, watch), data references (offloaded tool
results and ordinary entries) and the `shared_memory_*` built-in tools."""

import asyncio
import json
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api import new_session

SM = "/v1/shared-memory"


@dataclass
class World:
    """Agent a2's session and everything hanging off it; the callers who try to reach it."""

    secret: str
    sid: str
    offloaded_ref: str
    entry_ref: str
    owner: httpx.AsyncClient
    service: httpx.AsyncClient
    intruders: dict[str, httpx.AsyncClient] = field(default_factory=dict)
    intruder_sessions: dict[str, str] = field(default_factory=dict)


async def build_world(tenant, admin_client) -> World:
    secret = "SECRET" + secrets.token_hex(8)
    owner = await tenant.new_client(role="agent", agent_id="a2")
    service = tenant.client_for(tenant.service_key)
    sid = await new_session(owner)
    big = json.dumps([{"row": i, "note": secret} for i in range(6000)])
    assert len(big) > 150_000
    r = await owner.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": f"remember {secret}"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "tu_1", "name": "dump", "input": {"q": secret}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": big}],
                },
                {"role": "assistant", "content": f"done {secret}"},
            ]
        },
    )
    assert r.status_code == 201, r.text
    offloaded = r.json()["messages"][2]["metadata"]["data_ref"]["id"]
    r = await owner.put(
        f"{SM}/session/notes/plan", params={"scope_id": sid}, json={"value": {"secret": secret}}
    )
    assert r.status_code == 201, r.text
    r = await owner.put(
        f"/v1/sessions/{sid}/kernel/schemas/orders",
        json={"schema": {"type": "object", "title": secret}},
    )
    assert r.status_code == 200, r.text
    world = World(secret, sid, offloaded, r.headers.get("x-loom-ref-id", ""), owner, service)
    world.entry_ref = (
        await owner.get(f"{SM}/session/notes/plan", params={"scope_id": sid, "ref": "true"})
    ).json()["id"]

    # Intruders: another agent of the tenant (its own key, and a service key acting as it
    # through a tool call is covered separately), the same agent id in another tenant, and
    # that tenant's service and admin keys.
    world.intruders["agent key of a1"] = await tenant.new_client(role="agent", agent_id="a1")
    other = await admin_client.post("/v1/tenants", json={"name": f"o-{uuid.uuid4().hex[:8]}"})
    other_id = other.json()["id"]
    for role in ("agent", "service"):
        body: dict[str, Any] = {"tenant_id": other_id, "role": role}
        if role == "agent":
            body["agent_id"] = "a2"
        key = (await admin_client.post("/v1/api-keys", json=body)).json()["secret"]
        world.intruders[f"{role} key of another tenant"] = tenant.client_for(
            key, {"X-Agent-Id": "a2"} if role == "service" else None
        )
    world.intruders["admin acting in another tenant"] = tenant.client_for(
        tenant.admin.headers["Authorization"].split()[1],
        {"X-Tenant-Id": other_id, "X-Agent-Id": "a2"},
    )
    for name, client in world.intruders.items():
        world.intruder_sessions[name] = await new_session(client)
    return world


def routes(w: World) -> list[tuple[str, str, dict[str, Any]]]:
    """Every route that takes a session id (directly, as scope_id, or through a ref)."""
    s = f"/v1/sessions/{w.sid}"
    scope = {"scope_id": w.sid}
    return [
        ("GET", s, {}),
        ("PATCH", s, {"json": {"metadata": {"x": 1}}}),
        ("DELETE", s, {}),
        ("POST", f"{s}/messages", {"json": {"messages": [{"role": "user", "content": "hi"}]}}),
        (
            "POST",
            f"{s}/messages",
            {
                "json": {"messages": [{"role": "user", "content": "hi"}]},
                "headers": {"Idempotency-Key": "k1"},
            },
        ),
        (
            "POST",
            f"{s}/messages",
            {
                "json": {
                    "messages": [
                        {
                            "role": "assistant",
                            "content": [
                                {"type": "tool_use", "id": "tu_9", "name": "x", "input": {}}
                            ],
                        },
                        {"role": "tool", "tool_call_id": "tu_9", "content": "y" * 120_000},
                    ]
                }
            },
        ),
        ("GET", f"{s}/messages", {}),
        ("POST", f"{s}/context", {"json": {"format": "raw"}}),
        ("GET", f"{s}/memory", {}),
        ("GET", f"{s}/memory/snapshots", {}),
        ("POST", f"{s}/memory/compress", {}),
        ("POST", f"{s}/memory/promote", {"json": {"seqs": [1]}}),
        ("DELETE", f"{s}/memory/promoted", {}),
        ("GET", f"{s}/kernel", {}),
        ("PUT", f"{s}/kernel/tools", {"json": {"tools": []}}),
        ("PUT", f"{s}/kernel/schemas/planted", {"json": {"schema": {"type": "object"}}}),
        ("GET", f"{s}/kernel/schemas/orders", {}),
        ("POST", f"{s}/search", {"json": {"query": "remember"}}),
        ("GET", f"{s}/tools", {}),
        (
            "POST",
            f"{s}/tool-calls",
            {"json": {"type": "tool_use", "id": "t", "name": "recall_conversation", "input": {}}},
        ),
        ("GET", f"{SM}/session", {"params": scope}),
        ("GET", f"{SM}/session/notes/plan", {"params": scope}),
        ("GET", f"{SM}/session/notes/plan", {"params": {**scope, "ref": "true"}}),
        ("PUT", f"{SM}/session/planted", {"params": scope, "json": {"value": 1}}),
        ("PUT", f"{SM}/session/notes/plan", {"params": scope, "json": {"value": 2}}),
        ("DELETE", f"{SM}/session/notes/plan", {"params": scope}),
        ("GET", f"{SM}/session/watch", {"params": {**scope, "include_initial": "true"}}),
        ("GET", f"/v1/refs/{w.offloaded_ref}", {}),
        ("GET", f"/v1/refs/{w.offloaded_ref}", {"params": {"meta": "true"}}),
        ("GET", f"/v1/refs/{w.entry_ref}", {}),
        ("GET", f"/v1/refs/{w.entry_ref}", {"params": {"meta": "true"}}),
    ]


def tool_calls(w: World) -> list[tuple[str, dict[str, Any]]]:
    """Built-in tools run in the intruder's own session, aimed at a2's session scope."""
    scope = {"namespace": "session", "scope_id": w.sid}
    return [
        ("shared_memory_read", {**scope, "key": "notes/plan"}),
        ("shared_memory_read", {**scope, "key": f"tool_results/{w.offloaded_ref}"}),
        ("shared_memory_list", {"namespace": "session", "scope_id": w.sid}),
        ("shared_memory_write", {**scope, "key": "planted", "value": 1}),
        ("shared_memory_write", {**scope, "key": "notes/plan", "value": 2}),
        ("shared_memory_delete", {**scope, "key": "notes/plan"}),
    ]


async def _request(
    client: httpx.AsyncClient, method: str, path: str, kw: dict[str, Any]
) -> httpx.Response:
    # An SSE stream that opened would never end: a timeout here means the watch leaked.
    return await asyncio.wait_for(client.request(method, path, **kw), timeout=10)


async def assert_untouched(w: World) -> None:
    """a2's data is exactly as a2 left it."""
    msgs = (await w.owner.get(f"/v1/sessions/{w.sid}/messages")).json()["items"]
    assert len(msgs) == 4
    listing = (await w.owner.get(f"{SM}/session", params={"scope_id": w.sid})).json()
    keys = sorted(i["key"] for i in listing["items"])
    assert len(keys) == 2 and "notes/plan" in keys, keys
    entry = (await w.owner.get(f"{SM}/session/notes/plan", params={"scope_id": w.sid})).json()
    assert entry["version"] and entry["value"] == {"secret": w.secret}
    kernel = (await w.owner.get(f"/v1/sessions/{w.sid}/kernel")).json()
    assert "planted" not in json.dumps(kernel)


def assert_hidden(resp: httpx.Response, w: World, what: str) -> None:
    assert resp.status_code == 404, (what, resp.status_code, resp.text[:300])
    assert resp.json()["error"]["code"] in ("session_not_found", "ref_not_found"), resp.text
    assert w.secret not in resp.text and "notes/plan" not in resp.text


async def test_owner_and_service_key_see_everything(tenant, admin_client):
    """The other half of the rule: the route list really reaches the data (so the 404s in
    the property test come from the rule, not from broken requests)."""
    w = await build_world(tenant, admin_client)
    for who in (w.owner, w.service):
        for method, path, kw in routes(w):
            if method != "GET" or path.endswith("/watch"):
                continue
            r = await _request(who, method, path, kw)
            assert r.status_code == 200, (path, r.text[:300])
        r = await who.get(f"/v1/refs/{w.offloaded_ref}")
        assert w.secret in r.text
    r = await w.service.post(
        f"/v1/sessions/{w.sid}/tool-calls",
        json={
            "type": "tool_use",
            "id": "t",
            "name": "shared_memory_read",
            "input": {"namespace": "session", "scope_id": w.sid, "key": "notes/plan"},
        },
    )
    assert w.secret in r.json()["content"]


async def test_intruder_tool_calls_cannot_reach_another_agents_session(tenant, admin_client):
    """Each of the four shared-memory tools, from the intruder's own session, including a
    service key running a1's session's tools (tools act as the session's agent)."""
    w = await build_world(tenant, admin_client)
    a1_sid = w.intruder_sessions["agent key of a1"]
    for runner in (w.intruders["agent key of a1"], w.service):
        for name, tool_input in tool_calls(w):
            r = await runner.post(
                f"/v1/sessions/{a1_sid}/tool-calls",
                json={"type": "tool_use", "id": "t", "name": name, "input": tool_input},
            )
            assert r.status_code == 200, r.text
            block = r.json()
            assert block["is_error"] is True, (name, block)
            assert json.loads(block["content"])["error"]["code"] == "SESSION_NOT_FOUND"
            assert w.secret not in block["content"]
    await assert_untouched(w)


async def test_stats_count_only_visible_sessions(tenant, admin_client):
    w = await build_world(tenant, admin_client)
    intruder = w.intruders["agent key of a1"]
    own = w.intruder_sessions["agent key of a1"]
    await intruder.put(f"{SM}/session/mine", params={"scope_id": own}, json={"value": 1})
    stats = (await intruder.get(f"{SM}/stats")).json()
    session_ns = next(n for n in stats["namespaces"] if n["namespace"] == "session")
    assert session_ns["keys"] == 1
    stats = (await w.service.get(f"{SM}/stats")).json()
    assert next(n for n in stats["namespaces"] if n["namespace"] == "session")["keys"] == 3


async def test_every_session_entrance_is_404_for_those_who_cannot_see_it(tenant, admin_client):
    """Property: for generated (caller, route) pairs, and (caller, tool call) pairs, a
    caller who can't see the owning session gets 404 and no byte of its data, and nothing
    of a2's changes."""
    holder: dict[str, World] = {}

    async def world() -> World:
        if "w" not in holder:
            holder["w"] = await build_world(tenant, admin_client)
        return holder["w"]

    w0 = await world()
    n_routes, n_tools = len(routes(w0)), len(tool_calls(w0))
    names = sorted(w0.intruders)

    @settings(
        max_examples=120,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        caller=st.sampled_from(names),
        target=st.one_of(
            st.tuples(st.just("route"), st.integers(0, n_routes - 1)),
            st.tuples(st.just("tool"), st.integers(0, n_tools - 1)),
        ),
    )
    def check(caller: str, target: tuple[str, int]) -> None:
        loop.run_until_complete(one(caller, target))

    async def one(caller: str, target: tuple[str, int]) -> None:
        w = await world()
        client = w.intruders[caller]
        kind, i = target
        if kind == "route":
            method, path, kw = routes(w)[i]
            assert_hidden(await _request(client, method, path, kw), w, f"{caller} {path}")
        else:
            name, tool_input = tool_calls(w)[i]
            own = w.intruder_sessions[caller]
            r = await client.post(
                f"/v1/sessions/{own}/tool-calls",
                json={"type": "tool_use", "id": "t", "name": name, "input": tool_input},
            )
            assert r.status_code == 200, r.text
            block = r.json()
            assert block["is_error"] is True, (caller, name, block)
            assert w.secret not in block["content"]
        await assert_untouched(w)

    # Hypothesis drives synchronous tests: run the examples on a private loop in a thread
    # (the ASGI app and its pools are loop-bound, so the requests hop back to this loop).
    main_loop = asyncio.get_running_loop()

    class _Bridge:
        def run_until_complete(self, coro: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(coro, main_loop).result(timeout=60)

    loop = _Bridge()
    await asyncio.to_thread(check)

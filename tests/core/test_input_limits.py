"""Hostile input ends as a 4xx envelope, never a 500 nor a stored row: JSON nesting, forged
cursors, oversized and chunked bodies, tool inputs, filter lists, agent ids."""

import base64
import json
import uuid
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa

from app.core.pagination import encode_cursor
from tests.support.api import make_client, new_session


def deep(n: int, leaf: object = 1) -> object:
    v = leaf
    for _ in range(n):
        v = {"a": v}
    return v


def deep_text(n: int) -> str:
    return '{"a":' * n + "1" + "}" * n


def assert_error(resp, status: int, code: str | None = None) -> dict:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"code", "message", "details"}
    if code is not None:
        assert err["code"] == code, err
    return err


async def _message_count(db, sid: str) -> int:
    return (
        await db.execute(sa.text("select count(*) from messages where session_id = :s"), {"s": sid})
    ).scalar_one()


# --- 1. JSON nesting ----------------------------------------------------------------------


@pytest.mark.parametrize("depth", [300, 999, 5000])
async def test_deep_json_in_message_fields_is_422_naming_the_field(client, db, depth):
    sid = await new_session(client)
    d = deep_text(depth)
    # Sent as text: the client's own json.dumps would recurse too deep.
    for raw, field in (
        ('{"messages":[{"role":"user","content":"hi","metadata":' + d + "}]}", "metadata"),
        (
            '{"messages":[{"role":"user","content":[{"type":"text","text":"x","x":' + d + "}]}]}",
            "content",
        ),
        (
            '{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"f",'
            '"input":' + d + "}]}]}",
            "tool_calls",
        ),
    ):
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            content=raw,
            headers={"Content-Type": "application/json"},
        )
        err = assert_error(r, 422, "json_too_deep")
        assert err["details"][0]["loc"][:4] == ["body", "messages", 0, field]
        assert "64" in err["message"] and field in err["message"]
    assert await _message_count(db, sid) == 0


async def test_json_at_the_limit_is_stored_and_served(client):
    sid = await new_session(client)
    # body { messages [ { metadata ... } ] }: 3 levels around the metadata
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "hi", "metadata": deep(61)}]},
    )
    assert r.status_code == 201, r.text
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "hi", "metadata": deep(62)}]},
    )
    assert_error(r, 422, "json_too_deep")
    page = await client.get(f"/v1/sessions/{sid}/messages")
    assert page.status_code == 200 and len(page.json()["items"]) == 1


async def test_deep_openai_arguments_string_is_422(client, db):
    sid = await new_session(client)
    for depth in (100, 999, 5000):
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": deep_text(depth)},
                            }
                        ],
                    }
                ]
            },
        )
        err = assert_error(r, 422, "json_too_deep")
        assert err["details"][0]["loc"][:7] == [
            "body",
            "messages",
            0,
            "tool_calls",
            0,
            "function",
            "arguments",
        ]
    assert await _message_count(db, sid) == 0


@pytest.mark.parametrize(
    "route", ["session_metadata", "memory_item", "learned", "kernel", "tool_input", "shared_json"]
)
async def test_deep_json_in_other_bodies_is_422(client, route):
    body = deep_text(999)
    if route == "session_metadata":
        method, path, raw = "POST", "/v1/sessions", '{"metadata":' + body + "}"
    elif route == "memory_item":
        method, path = "POST", "/v1/memory-items"
        raw = '{"scope":"global","text":"x","metadata":' + body + "}"
    elif route == "learned":
        method, path, raw = "PUT", "/v1/agents/agent-1/learned", '{"artifacts":' + body + "}"
    elif route == "kernel":
        sid = await new_session(client)
        method, path, raw = "PUT", f"/v1/sessions/{sid}/kernel/schemas/s1", body
    elif route == "tool_input":
        sid = await new_session(client)
        method, path = "POST", f"/v1/sessions/{sid}/tool-calls"
        raw = (
            '{"type":"tool_use","id":"t1","name":"shared_memory_write","input":'
            '{"namespace":"agent","key":"k","value":' + body + "}}"
        )
    else:
        method, path, raw = "PUT", "/v1/shared-memory/agent/k", '{"value":' + body + "}"
    r = await client.request(
        method, path, content=raw, headers={"Content-Type": "application/json"}
    )
    err = assert_error(r, 422, "json_too_deep")
    assert err["details"][0]["loc"][0] == "body"


async def test_deep_json_in_metadata_header_is_422(client):
    for depth in (300, 999):
        r = await client.put(
            "/v1/shared-memory/agent/raw",
            content=b"bytes",
            headers={
                "Content-Type": "application/octet-stream",
                "X-Loom-Metadata": deep_text(depth),
            },
        )
        err = assert_error(r, 422, "json_too_deep")
        assert err["details"][0]["loc"][:2] == ["header", "x-loom-metadata"]
    assert (await client.get("/v1/shared-memory/agent/raw")).status_code == 404
    ok = await client.put(
        "/v1/shared-memory/agent/raw",
        content=b"bytes",
        headers={
            "Content-Type": "application/octet-stream",
            "X-Loom-Metadata": json.dumps(deep(10)),
        },
    )
    assert ok.status_code == 201, ok.text


async def test_brackets_inside_strings_do_not_count(client):
    sid = await new_session(client)
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "[" * 5000 + '\\"{' * 100, "metadata": {"k": "{" * 999}}
            ]
        },
    )
    assert r.status_code == 201, r.text


# --- 2. Cursors ---------------------------------------------------------------------------


def _unsigned(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


FORGED = [
    _unsigned('{"after_seq": 1e400}'),
    _unsigned('{"s": 1e400}'),
    _unsigned('{"o":"importance:desc","v":' + "9" * 401 + ',"i":"x"}'),
    _unsigned("[" * 5000 + "]" * 5000),
    _unsigned('{"after":' + '{"a":' * 5000 + "1" + "}" * 5001),
    "%%%garbage",
    "a.b",
    "x" * 5000,
]


async def _cursor_routes(client, tenant):
    sid = await new_session(client)
    return [
        ("GET", "/v1/sessions", None),
        ("GET", f"/v1/sessions/{sid}/messages", None),
        ("GET", f"/v1/sessions/{sid}/memory/snapshots", None),
        ("GET", "/v1/shared-memory/agent", None),
        ("POST", "/v1/memory-items/query", {}),
        ("GET", "/v1/api-keys", {"tenant_id": tenant.id}),
    ]


async def _get_page(client, tenant, method, path, extra, cursor):
    if method == "POST":
        return await client.post(path, json={"cursor": cursor})
    params = {"cursor": cursor, **(extra or {})}
    c = tenant.admin if path == "/v1/api-keys" else client
    return await c.get(path, params=params)


async def test_forged_and_damaged_cursors_are_400_on_every_route(client, tenant):
    for method, path, extra in await _cursor_routes(client, tenant):
        for cursor in FORGED:
            r = await _get_page(client, tenant, method, path, extra, cursor)
            assert_error(r, 400, "invalid_cursor")


async def test_signed_cursor_with_wrong_types_is_400(client, tenant):
    sid = await new_session(client)
    cases: list[tuple[str, dict[str, Any]]] = [
        (f"/v1/sessions/{sid}/messages", {"after_seq": True}),
        (f"/v1/sessions/{sid}/messages", {"after_seq": 10**400}),
        (f"/v1/sessions/{sid}/messages", {"after_seq": "1"}),
        (f"/v1/sessions/{sid}/messages", {"after_seq": 1, "x": 2}),
        (f"/v1/sessions/{sid}/memory/snapshots", {"s": 2**63}),
        ("/v1/sessions", {"t": 1, "id": "x"}),
        ("/v1/shared-memory/agent", {"after": ["x"]}),
    ]
    for path, payload in cases:
        r = await client.get(path, params={"cursor": encode_cursor(payload)})
        assert_error(r, 400, "invalid_cursor")
    r = await client.post(
        "/v1/memory-items/query",
        json={
            "cursor": encode_cursor(
                {"o": "importance:desc", "v": 10**401, "i": "00000000-0000-0000-0000-000000000000"}
            )
        },
    )
    assert_error(r, 400, "invalid_cursor")


async def test_tampered_cursor_is_400_and_a_real_one_pages(client):
    sid = await new_session(client)
    await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": str(i)} for i in range(5)]},
    )
    page = (await client.get(f"/v1/sessions/{sid}/messages", params={"limit": 2})).json()
    cursor = page["next_cursor"]
    body, tag = cursor.split(".")
    forged_body = _unsigned('{"after_seq":0}')
    for bad in (
        f"{forged_body}.{tag}",
        cursor[:-1] + ("A" if cursor[-1] != "A" else "B"),
        cursor + "\n",
    ):
        r = await client.get(f"/v1/sessions/{sid}/messages", params={"cursor": bad})
        assert_error(r, 400, "invalid_cursor")
    nxt = (
        await client.get(f"/v1/sessions/{sid}/messages", params={"cursor": cursor, "limit": 2})
    ).json()
    assert [m["seq"] for m in nxt["items"]] == [3, 4]


async def test_openapi_describes_cursors(client):
    doc = (await client.get("/openapi.json")).json()
    params = doc["paths"]["/v1/sessions"]["get"]["parameters"]
    cursor = next(p for p in params if p["name"] == "cursor")
    schema = cursor["schema"]
    text = json.dumps(schema)
    assert "pattern" in text and "maxLength" in text


# --- 3. Body size -------------------------------------------------------------------------

SMALL_REQUEST = 200_000
SMALL_MESSAGE = 4096


@pytest.fixture(scope="module")
async def small_app(settings):
    """The app with small request and message limits (same stores)."""
    from app.main import create_app

    s = settings.model_copy(
        update={"max_request_bytes": SMALL_REQUEST, "max_message_bytes": SMALL_MESSAGE}
    )
    application = create_app(s)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def small_client(small_app, tenant):
    async with make_client(small_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        yield c


async def _chunks(total: int, size: int = 16_384):
    yield b'{"messages":[{"role":"user","content":"'
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        sent += n
        yield b"x" * n
    yield b'"}]}'


async def test_chunked_body_over_the_limit_is_413_and_nothing_stored(small_client, db):
    sid = await new_session(small_client)
    r = await small_client.post(
        f"/v1/sessions/{sid}/messages",
        content=_chunks(SMALL_REQUEST),
        headers={"Content-Type": "application/json"},
    )
    assert "content-length" not in {k.lower() for k in r.request.headers}
    assert_error(r, 413, "payload_too_large")
    assert await _message_count(db, sid) == 0
    # a raw shared-memory value, chunked, too
    r = await small_client.put(
        "/v1/shared-memory/agent/big",
        content=_chunks(SMALL_REQUEST),
        headers={"Content-Type": "application/octet-stream"},
    )
    assert_error(r, 413, "payload_too_large")
    assert (await small_client.get("/v1/shared-memory/agent/big")).status_code == 404
    # under the limit, chunked is fine
    r = await small_client.post(
        f"/v1/sessions/{sid}/messages",
        content=_chunks(1000),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 201, r.text


async def test_message_over_the_per_message_limit_is_413(small_client, db):
    sid = await new_session(small_client)
    r = await small_client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "ok"},
                {"role": "user", "content": "y" * (SMALL_MESSAGE + 1)},
            ]
        },
    )
    err = assert_error(r, 413, "message_too_large")
    assert err["details"][0]["loc"] == ["body", "messages", 1]
    r = await small_client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [{"role": "user", "content": "ok", "metadata": {"m": "z" * SMALL_MESSAGE}}]
        },
    )
    assert_error(r, 413, "message_too_large")
    assert await _message_count(db, sid) == 0
    # many messages each under the limit are fine while the batch is under the request limit
    r = await small_client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "w " * 1500} for _ in range(20)]},
    )
    assert r.status_code == 201, r.text


@pytest.fixture(scope="module")
async def patient_app(settings):
    """The app with a generous database time bound: storing two 3.5 MB messages (their
    search vectors) takes seconds, more than the 5 s default on a loaded machine."""
    from app.main import create_app

    application = create_app(settings.model_copy(update={"db_statement_timeout_seconds": 60.0}))
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def patient_client(patient_app, tenant):
    async with make_client(patient_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        yield c


async def test_large_append_does_not_stall_the_event_loop(patient_client):
    """Token counting of a large batch runs off the loop: a concurrent request is served."""
    import asyncio
    import time

    client = patient_client
    sid = await new_session(client)
    words = " ".join(f"w{i % 977}x{i % 13}" for i in range(400_000))  # ~3.5 MB
    stalls: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            stalls.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    try:
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": words} for _ in range(2)]},
        )
    finally:
        tick.cancel()
    assert r.status_code == 201, r.text
    assert r.json()["messages"][0]["token_count"] > 100_000
    assert max(stalls) < 0.5, max(stalls)


# --- 4. Tool inputs -----------------------------------------------------------------------


async def _tool(client, sid, name, tool_input):
    r = await client.post(
        f"/v1/sessions/{sid}/tool-calls",
        json={"type": "tool_use", "id": "toolu_1", "name": name, "input": tool_input},
    )
    assert r.status_code == 200, r.text
    block = r.json()
    return block["is_error"], json.loads(block["content"])


@pytest.mark.parametrize(
    "name,tool_input",
    [
        ("recall_conversation", {"offset": 2**63}),
        ("recall_conversation", {"offset": 10**30}),
        ("recall_conversation", {"limit": 2**63}),
        (
            "shared_memory_write",
            {"namespace": "agent", "key": "k", "value": 1, "ttl_seconds": 10**30},
        ),
        (
            "shared_memory_write",
            {"namespace": "agent", "key": "k", "value": 1, "ttl_seconds": 10**12},
        ),
        (
            "shared_memory_write",
            {"namespace": "agent", "key": "k", "value": 1, "if_version": 10**30},
        ),
        (
            "shared_memory_write",
            {"namespace": "agent", "key": "k", "value": 1, "if_version": 2**63},
        ),
        ("shared_memory_list", {"namespace": "agent", "limit": 10**30}),
        ("search_conversation", {"query": "x", "limit": 2**63}),
        ("shared_memory_read", {"namespace": "agent", "key": "k" * 10_000}),
    ],
)
async def test_out_of_range_tool_inputs_are_invalid_parameter(client, db, name, tool_input, caplog):
    sid = await new_session(client)
    is_error, content = await _tool(client, sid, name, tool_input)
    assert is_error is True
    assert content["error"]["code"] == "INVALID_PARAMETER", content
    assert "Traceback" not in caplog.text
    assert (await client.get("/v1/shared-memory/agent/k")).status_code == 404


async def test_tool_inputs_at_the_bounds_work(client):
    sid = await new_session(client)
    is_error, content = await _tool(client, sid, "recall_conversation", {"offset": 2**63 - 1})
    assert is_error is False and content["messages"] == []
    is_error, content = await _tool(
        client,
        sid,
        "shared_memory_write",
        {"namespace": "agent", "key": "k", "value": 1, "ttl_seconds": 10 * 365 * 24 * 3600},
    )
    assert is_error is False, content
    tools = (await client.get(f"/v1/sessions/{sid}/tools")).json()["tools"]
    write = next(t for t in tools if t["name"] == "shared_memory_write")
    assert write["input_schema"]["properties"]["ttl_seconds"]["maximum"] == 10 * 365 * 24 * 3600


# --- 5. Filter lists ----------------------------------------------------------------------


async def test_filter_with_too_many_values_is_422(client):
    kinds = [f"k{i}" for i in range(40_000)]
    for path, body in (
        ("/v1/memory-items/query", {"filters": {"kind": kinds}}),
        ("/v1/memory-items/query", {"filters": {"kind": {"$ne": kinds}}}),
        ("/v1/memory-items/clear", {"scope": "task/t1", "filters": {"tags": kinds}}),
    ):
        r = await client.post(path, json=body)
        err = assert_error(r, 422, "invalid_query")
        assert "at most 1000" in json.dumps(err["details"])
    r = await client.post("/v1/memory-items/query", json={"filters": {"kind": kinds[:1000]}})
    assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
async def wide_filters_app(settings):
    from app.main import create_app

    application = create_app(settings.model_copy(update={"filter_max_values": 10_000}))
    async with application.router.lifespan_context(application):
        yield application
    from app.knowledge import filters

    filters.configure(settings.filter_max_values)


async def test_wide_filters_are_one_argument_per_list_not_per_value(wide_filters_app, tenant):
    # 36,000 values: past asyncpg's 32,767 query arguments when each value was one; a list
    # is one array argument now, so the query runs (and finds the one item it names)
    async with make_client(wide_filters_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        made = await c.post(
            "/v1/memory-items", json={"scope": "task/wide", "kind": "kind8999", "text": "text7"}
        )
        assert made.status_code == 201, made.text
        many = {f: [f"{f}{i}" for i in range(9_000)] for f in ("kind", "source", "text")}
        many["id"] = [made.json()["id"], *(str(uuid.UUID(int=i)) for i in range(8_999))]
        many["source"][0] = made.json()["source"]
        r = await c.post("/v1/memory-items/query", json={"filters": many})
    assert r.status_code == 200, r.text
    assert [i["id"] for i in r.json()["items"]] == [made.json()["id"]]


def test_a_query_over_the_driver_s_argument_limit_is_422_not_500():
    from app.core.error_handlers import store_error

    exc = asyncpg.exceptions.InterfaceError("the number of query arguments cannot exceed 32767")
    err = store_error(RuntimeError("wrapped"))
    assert err.status_code == 500
    try:
        raise RuntimeError("the statement failed") from exc
    except RuntimeError as wrapped:
        err = store_error(wrapped)
    assert (err.status_code, err.code) == (422, "too_many_values")


# --- 6. Agent ids -------------------------------------------------------------------------

BAD_AGENT_IDS = ["éé", "a" * 300, "-leading", "a b", "a/b", "x\ty"]


async def test_bad_x_agent_id_is_400_invalid_agent_id(tenant, db):
    for bad in BAD_AGENT_IDS:
        c = tenant.client_for(tenant.service_key, {"X-Agent-Id": bad.encode()})
        r = await c.post("/v1/sessions", json={})
        err = assert_error(r, 400, "invalid_agent_id")
        assert "x-agent-id" in err["message"].lower()
    n = (
        await db.execute(
            sa.text("select count(*) from sessions where tenant_id = :t"), {"t": tenant.id}
        )
    ).scalar_one()
    assert n == 0
    ok = tenant.client_for(tenant.service_key, {"X-Agent-Id": "a2:x"})
    assert (await ok.post("/v1/sessions", json={})).status_code == 201  # ':' is allowed


async def test_bad_agent_id_in_body_path_and_query_is_the_same_400(client, tenant):
    for bad in ("éé", "a" * 300):
        for method, path, kwargs in (
            ("POST", "/v1/sessions", {"json": {"agent_id": bad}}),
            ("POST", "/v1/search", {"json": {"query": "x", "scope": "agent", "agent_id": bad}}),
            ("GET", "/v1/sessions", {"params": {"agent_id": bad}}),
            ("GET", f"/v1/agents/{bad}/profile", {}),
            ("GET", f"/v1/agents/{bad}/learned", {}),
        ):
            r = await client.request(method, path, **kwargs)
            err = assert_error(r, 400, "invalid_agent_id")
            assert err["details"][0]["loc"][-1] == "agent_id", err
        r = await tenant.admin.post(
            "/v1/api-keys", json={"tenant_id": tenant.id, "role": "agent", "agent_id": bad}
        )
        assert_error(r, 400, "invalid_agent_id")
    # other validation errors keep their 422
    r = await client.post("/v1/sessions", json={"agent_id": "ok", "config": "nope"})
    assert_error(r, 422, "validation_error")

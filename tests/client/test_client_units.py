"""The client without a server: error envelopes to typed exceptions, headers (agent,
tenant, per-call options, with_agent copies), SSE parsing and tool-call shapes, through
httpx's MockTransport."""

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from loom_client import (
    AsyncLoomClient,
    Conflict,
    LoomClient,
    LoomError,
    NotFound,
    RateLimited,
    ServerError,
    Unavailable,
    ValidationError,
)
from loom_client.models import (
    DeleteEvent,
    HeartbeatEvent,
    PutEvent,
    ReadyEvent,
    ToolResult,
    UnknownEvent,
)
from loom_client.models.watch import SSEParser
from loom_client.providers import tool_calls_in, tool_result_for, tool_use_of


def envelope(
    status: int, code: str, details: Any = None, headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(
        status,
        headers=headers,
        json={"error": {"code": code, "message": f"{code} happened", "details": details}},
    )


def mock_client(handler: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> LoomClient:
    return LoomClient(
        "http://loom.test", "lm_key", transport=httpx.MockTransport(handler), **kwargs
    )


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (404, NotFound),
        (409, Conflict),
        (422, ValidationError),
        (429, RateLimited),
        (503, Unavailable),
        (500, ServerError),
        (418, LoomError),
    ],
)
def test_envelope_becomes_typed_error(status: int, cls: type[LoomError]) -> None:
    details = [{"loc": ["query", "limit"], "msg": "too big", "type": "less_than_equal"}]
    client = mock_client(
        lambda request: envelope(status, "some_code", details, {"Retry-After": "3"})
    )
    with pytest.raises(cls) as caught:
        client.get_session("s1")
    error = caught.value
    assert type(error) is cls
    assert (error.status, error.code, error.details) == (status, "some_code", details)
    assert error.message == "some_code happened" and str(error).startswith(f"{status} ")
    if isinstance(error, (RateLimited, Unavailable)):
        assert error.retry_after == 3.0


def test_non_envelope_error_body() -> None:
    client = mock_client(lambda request: httpx.Response(502, text="bad gateway"))
    with pytest.raises(ServerError) as caught:
        client.healthz()
    assert (caught.value.status, caught.value.code) == (502, "http_502")
    assert caught.value.message == "bad gateway"


def test_headers_agent_tenant_options_and_copies() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "ok"})

    client = mock_client(handler, agent_id="a1", tenant_id="t1")
    client.healthz()
    client.healthz(options={"agent_id": "a2", "tenant_id": None, "headers": {"X-Trace": "1"}})
    other = client.with_agent("a3")
    other.healthz()
    other.close()  # a copy leaves the shared connections open
    client.healthz()
    first, second, third, fourth = (r.headers for r in seen)
    assert first["authorization"] == "Bearer lm_key"
    assert (first["x-agent-id"], first["x-tenant-id"]) == ("a1", "t1")
    assert second["x-agent-id"] == "a2" and "x-tenant-id" not in second
    assert second["x-trace"] == "1"
    assert (third["x-agent-id"], third["x-tenant-id"]) == ("a3", "t1")
    assert fourth["x-agent-id"] == "a1" and client.agent_id == "a1"
    client.close()


def test_request_shapes() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return envelope(404, "entry_not_found")

    client = mock_client(handler)
    for call in (
        lambda: client.put_shared_memory(
            "workflow", "a b/c?d", {"x": 1}, scope_id="wf-1", if_match=3
        ),
        lambda: client.delete_shared_memory("global", "k", if_match='"4"'),
        lambda: client.append_messages(
            "s1", [{"role": "user", "content": "hi"}], idempotency_key="turn-1"
        ),
        lambda: client.compress("s1", wait=True),
    ):
        with pytest.raises(NotFound):
            call()
    put, delete, append, compress = seen
    assert put.url.raw_path == b"/v1/shared-memory/workflow/a%20b/c%3Fd?scope_id=wf-1"
    assert put.headers["if-match"] == '"3"' and json.loads(put.content) == {"value": {"x": 1}}
    assert delete.headers["if-match"] == '"4"'
    assert append.headers["idempotency-key"] == "turn-1"
    assert json.loads(append.content) == {"messages": [{"role": "user", "content": "hi"}]}
    assert compress.url.params["wait"] == "true"


async def test_async_client_maps_errors_too() -> None:
    transport = httpx.MockTransport(lambda request: envelope(409, "version_conflict"))
    async with AsyncLoomClient("http://loom.test", "k", transport=transport) as client:
        with pytest.raises(Conflict) as caught:
            await client.put_shared_memory("global", "k", 1, if_match=1)
    assert caught.value.code == "version_conflict"


def test_sse_parser() -> None:
    parser = SSEParser()
    stream = [
        ": a comment",
        "event: ready",
        'data: {"at":"2026-01-01T00:00:00+00:00"}',
        "",
        "id: 7",
        "event: put",
        'data: {"op":"put","namespace":"global","scope_id":null,',
        'data: "key":"cfg/a","version":7,"etag":"\\"7\\"","initial":false,"value":[1]}',
        "",
        "event: delete",
        'data: {"op":"delete","namespace":"global","key":"k","reason":"expired"}',
        "",
        "event: heartbeat",
        'data: {"at":"2026-01-01T00:00:15+00:00"}',
        "",
        "event: surprise",
        "data: 42",
        "",
        "event: put",
        "",  # no data: nothing to dispatch
    ]
    events = [e for e in (parser.feed(line) for line in stream) if e is not None]
    ready, put, delete, heartbeat, unknown = events
    assert isinstance(ready, ReadyEvent) and isinstance(heartbeat, HeartbeatEvent)
    assert isinstance(put, PutEvent)
    assert (put.id, put.key, put.version, put.etag, put.value) == ("7", "cfg/a", 7, '"7"', [1])
    assert isinstance(delete, DeleteEvent) and delete.reason == "expired"
    assert isinstance(unknown, UnknownEvent) and (unknown.event, unknown.data) == ("surprise", 42)


def test_tool_call_shapes() -> None:
    anthropic_block = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "recall_conversation",
        "input": {"offset": 2},
    }
    openai_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "recall_conversation", "arguments": '{"offset": 2}'},
    }
    assert tool_use_of(anthropic_block) == ("anthropic", anthropic_block)
    assert tool_use_of(openai_call) == ("openai", {**anthropic_block, "id": "call_1"})
    bad = {**openai_call, "function": {"name": "x", "arguments": "{not json"}}
    assert tool_use_of(bad)[1]["input"] == "{not json"  # the server answers the error
    result = ToolResult(tool_use_id="call_1", content='{"ok":true}', is_error=False)
    assert tool_result_for("openai", result) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"ok":true}',
    }
    assert tool_result_for("anthropic", result)["type"] == "tool_result"
    text = {"type": "text", "text": "let me look"}
    assert tool_calls_in([text, anthropic_block]) == [anthropic_block]
    assert tool_calls_in(None) == []
    with pytest.raises(TypeError):
        tool_use_of(text)

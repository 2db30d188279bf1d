"""`client.context(...)` goes straight into the real provider SDKs, and a model's tool calls
go through `execute_tool_calls` and back.

Checked three ways with the installed `anthropic` and `openai` packages: the keys against
the SDKs' own parameter TypedDicts (`MessageCreateParams`, `CompletionCreateParams`:
every key known, every required key present once `model`/`max_tokens` are added), the
values validated against those TypedDicts (pydantic, nested iterables drained), and a
real `create(**ctx)` call through the SDK into a mock transport that records the request.
"""

import json
import typing
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from loom_client import LoomClient
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import TypeAdapter

KERNEL_TOOL = {
    "name": "lookup_order",
    "description": "Find an order by id",
    "input_schema": {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
    },
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "text", "text": "Let me check the history."},
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "search_conversation",
            "input": {"query": "order 42 refund", "promote": False},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
OPENAI_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_01",
                        "type": "function",
                        "function": {
                            "name": "recall_conversation",
                            "arguments": '{"offset": 0, "limit": 2}',
                        },
                    }
                ],
            },
        }
    ],
}


class Recorder:
    """A mock transport for an SDK: records each request body, answers `reply`."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=self.reply)

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))


def keys_of(params: type) -> tuple[set[str], set[str]]:
    """(required keys, all keys) of an SDK TypedDict. The SDKs annotate with `Required[...]`
    under `from __future__ import annotations`, so `__required_keys__` is empty at run time
    and the resolved hints are what tells."""
    hints = typing.get_type_hints(params, include_extras=True)
    required = {k for k, v in hints.items() if typing.get_origin(v) is typing.Required}
    return required, set(hints)


def drain(value: Any) -> Any:
    """Consume pydantic's lazy iterators (Iterable fields), which validates their items."""
    if isinstance(value, dict):
        return {k: drain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "__next__"):
        return [drain(v) for v in value]
    return value


@pytest.fixture(scope="module")
def anthropic_params() -> TypeAdapter[Any]:
    return TypeAdapter(MessageCreateParamsNonStreaming)


@pytest.fixture(scope="module")
def openai_params() -> TypeAdapter[Any]:
    return TypeAdapter(CompletionCreateParamsNonStreaming)


@pytest.fixture
def sid(loom: LoomClient) -> Iterator[str]:
    """A session with a ROM, a Kernel tool and a tool round trip in its history."""
    session = loom.create_session(rom={"system_prompt": "You are the support agent."})
    loom.put_kernel_tools(session.id, [KERNEL_TOOL])
    loom.append_messages(
        session.id,
        [
            {"role": "user", "content": "Customer asks about the refund of order 42."},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_00",
                        "name": "lookup_order",
                        "input": {"id": "42"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_00", "content": "refunded"}
                ],
            },
            {"role": "assistant", "content": "Order 42 was refunded."},
            {"role": "user", "content": "When was the refund of order 42?"},
        ],
    )
    yield session.id


def test_anthropic_context_goes_into_messages_create(
    loom: LoomClient, sid: str, anthropic_params: TypeAdapter[Any]
) -> None:
    required, allowed = keys_of(MessageCreateParamsNonStreaming)
    ctx = loom.context(sid, format="anthropic")
    assert set(ctx) == {"system", "messages", "tools"}
    assert set(ctx) <= allowed and required - set(ctx) == {"model", "max_tokens"}
    assert ctx["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert ctx["tools"] == [KERNEL_TOOL]
    drain(anthropic_params.validate_python({"model": "claude-test", "max_tokens": 512, **ctx}))

    recorder = Recorder(ANTHROPIC_REPLY)
    sdk = anthropic.Anthropic(
        api_key="test", base_url="http://anthropic.test", http_client=recorder.client()
    )
    message = sdk.messages.create(model="claude-test", max_tokens=512, **ctx)
    assert recorder.bodies[0] == json.loads(
        json.dumps({"model": "claude-test", "max_tokens": 512, **ctx})
    )

    # the model asked for a built-in tool: run it, answer in the Anthropic shape
    results = loom.execute_tool_calls(sid, message.content)
    assert [r["tool_use_id"] for r in results] == ["toolu_01"]
    assert results[0]["type"] == "tool_result" and results[0]["is_error"] is False
    assistant = {
        "role": "assistant",
        "content": [b.model_dump(exclude_none=True) for b in message.content],
    }
    follow_up = [*ctx["messages"], assistant, {"role": "user", "content": results}]
    drain(
        anthropic_params.validate_python(
            {
                "model": "claude-test",
                "max_tokens": 512,
                "system": ctx["system"],
                "messages": follow_up,
                "tools": ctx["tools"],
            }
        )
    )
    sdk.messages.create(
        model="claude-test",
        max_tokens=512,
        system=ctx["system"],
        messages=follow_up,
        tools=ctx["tools"],
    )
    # stored back in Loom, the turn renders as a valid Anthropic context again
    loom.append_messages(sid, [assistant, {"role": "user", "content": results}])
    again = loom.context(sid, format="anthropic")
    drain(anthropic_params.validate_python({"model": "claude-test", "max_tokens": 1, **again}))


def test_openai_context_goes_into_chat_completions_create(
    loom: LoomClient, sid: str, openai_params: TypeAdapter[Any]
) -> None:
    required, allowed = keys_of(CompletionCreateParamsNonStreaming)
    ctx = loom.context(sid, format="openai")
    assert set(ctx) == {"messages", "tools"}
    assert set(ctx) <= allowed and required - set(ctx) == {"model"}
    assert ctx["messages"][0]["role"] == "system"
    assert ctx["tools"][0]["function"]["name"] == "lookup_order"
    drain(openai_params.validate_python({"model": "gpt-test", **ctx}))

    recorder = Recorder(OPENAI_REPLY)
    sdk = openai.OpenAI(
        api_key="test", base_url="http://openai.test/v1", http_client=recorder.client()
    )
    completion = sdk.chat.completions.create(model="gpt-test", **ctx)
    assert recorder.bodies[0] == json.loads(json.dumps({"model": "gpt-test", **ctx}))

    reply = completion.choices[0].message
    results = loom.execute_tool_calls(sid, reply.tool_calls)
    assert results == [
        {"role": "tool", "tool_call_id": "call_01", "content": results[0]["content"]}
    ]
    assert json.loads(results[0]["content"])["messages"][0]["seq"] == 1
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [c.model_dump() for c in reply.tool_calls or []],
    }
    follow_up = [*ctx["messages"], assistant, *results]
    drain(
        openai_params.validate_python(
            {"model": "gpt-test", "messages": follow_up, "tools": ctx["tools"]}
        )
    )
    sdk.chat.completions.create(model="gpt-test", messages=follow_up, tools=ctx["tools"])
    loom.append_messages(sid, [assistant, *results])
    again = loom.context(sid, format="openai")
    drain(openai_params.validate_python({"model": "gpt-test", **again}))


def test_contexts_without_tools(
    loom: LoomClient, anthropic_params: TypeAdapter[Any], openai_params: TypeAdapter[Any]
) -> None:
    """No Kernel tools: Anthropic keeps `tools: []` (accepted; `null` is not), OpenAI
    leaves `tools` out (the API refuses an empty array)."""
    sid = loom.create_session().id
    loom.append_messages(sid, [{"role": "user", "content": "hello"}])
    anthropic_ctx = loom.context(sid, format="anthropic")
    assert anthropic_ctx["tools"] == [] and anthropic_ctx["system"] == []
    drain(anthropic_params.validate_python({"model": "m", "max_tokens": 1, **anthropic_ctx}))
    openai_ctx = loom.context(sid, format="openai")
    assert set(openai_ctx) == {"messages"}
    drain(openai_params.validate_python({"model": "m", **openai_ctx}))
    recorder = Recorder(OPENAI_REPLY)
    openai.OpenAI(
        api_key="test", base_url="http://openai.test/v1", http_client=recorder.client()
    ).chat.completions.create(model="m", **openai_ctx)
    assert "tools" not in recorder.bodies[0]


def test_builtin_tools_fit_the_sdks(
    loom: LoomClient, sid: str, anthropic_params: TypeAdapter[Any], openai_params: TypeAdapter[Any]
) -> None:
    """`list_tools(...).params()` in either shape is a valid `tools` argument."""
    ctx = loom.context(sid, format="anthropic")
    tools = [*ctx["tools"], *loom.list_tools(sid).params()]
    drain(anthropic_params.validate_python({"model": "m", "max_tokens": 1, **ctx, "tools": tools}))
    octx = loom.context(sid, format="openai")
    otools = [*octx["tools"], *loom.list_tools(sid, format="openai").params()]
    drain(openai_params.validate_python({"model": "m", **octx, "tools": otools}))

"""Provider shapes (no I/O): a built context as SDK keyword arguments, and a model's tool
calls (Anthropic `tool_use` blocks or OpenAI `tool_calls` entries) to and from the server's
`tool_use` / `tool_result` blocks.

Empty lists: the Anthropic Messages API takes `tools: []` (it refuses `tools: null`), the
OpenAI Chat Completions API refuses `tools: []` ("empty array, expected minimum length 1"),
so the OpenAI arguments carry `tools` only when there are some.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from loom_client.models.context import ContextResponse
from loom_client.models.tools import ToolResult

ToolShape = Literal["anthropic", "openai"]


class ContextParams(dict[str, Any]):
    """Keyword arguments for a provider SDK, from a built context.

    Anthropic: `system`, `messages`, `tools` for
    `anthropic.Anthropic().messages.create(model=..., max_tokens=..., **ctx)`.
    OpenAI: `messages` (the system prompt is their first message) and `tools` when there
    are any, for `openai.OpenAI().chat.completions.create(model=..., **ctx)`.
    `response` is the whole built context: tokens per layer, usage, recall, compression.
    """

    def __init__(self, params: Mapping[str, Any], response: ContextResponse) -> None:
        super().__init__(params)
        self.response = response

    @property
    def format(self) -> str:
        return self.response.format

    @property
    def context_id(self) -> str:
        """The build's id (its manifest, when recorded: `get_context_manifest`)."""
        return self.response.context_id


def context_params(response: ContextResponse) -> ContextParams:
    """The SDK keyword arguments of an `anthropic` or `openai` context response."""
    if response.format == "anthropic":
        params: dict[str, Any] = {"system": response.system if response.system else [],
                                  "messages": response.messages, "tools": response.tools}
    elif response.format == "openai":
        params = {"messages": response.messages}
        if response.tools:
            params["tools"] = response.tools
    else:
        raise ValueError(f"no SDK arguments for the {response.format!r} format")
    return ContextParams(params, response)


def as_dict(obj: Any) -> dict[str, Any]:
    """A tool call as plain data: a mapping, or an SDK object (pydantic `model_dump`)."""
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        data = dump()
        if isinstance(data, dict):
            return data
    raise TypeError(f"not a tool call: {type(obj).__name__}")


def is_tool_call(data: Mapping[str, Any]) -> bool:
    """An Anthropic `tool_use` block or an OpenAI function tool call."""
    if data.get("type") == "tool_use":
        return True
    return isinstance(data.get("function"), Mapping) and "id" in data


def tool_use_of(call: Any) -> tuple[ToolShape, dict[str, Any]]:
    """The shape of a model's tool call and the `tool_use` block the server executes.

    An OpenAI call's `arguments` is JSON text; text that is not JSON is passed on as is,
    and the server answers it with an `INVALID_PARAMETER` tool error the model can read.
    """
    data = as_dict(call)
    if data.get("type") == "tool_use":
        return "anthropic", {"type": "tool_use", "id": data["id"], "name": data["name"],
                             "input": data.get("input") if data.get("input") is not None
                             else {}}
    function = data.get("function")
    if isinstance(function, Mapping) and "id" in data:
        arguments = function.get("arguments")
        tool_input: Any
        if arguments is None or arguments == "":
            tool_input = {}
        elif isinstance(arguments, str):
            try:
                tool_input = json.loads(arguments)
            except ValueError:
                tool_input = arguments
        else:
            tool_input = arguments
        return "openai", {"type": "tool_use", "id": data["id"], "name": function["name"],
                          "input": tool_input}
    raise TypeError("not a tool call: expected an Anthropic tool_use block or an OpenAI "
                    "tool_calls entry")


def tool_result_for(shape: ToolShape, result: ToolResult) -> dict[str, Any]:
    """The result in the shape of the call: a `tool_result` block (Anthropic) or a `tool`
    message (OpenAI; an error is in its JSON content)."""
    if shape == "anthropic":
        return {"type": "tool_result", "tool_use_id": result.tool_use_id,
                "content": result.content, "is_error": result.is_error}
    return {"role": "tool", "tool_call_id": result.tool_use_id, "content": result.content}


def tool_calls_in(items: Iterable[Any] | None) -> list[Any]:
    """The tool calls among `items` (an Anthropic message's content blocks, or an OpenAI
    message's `tool_calls`, which may be None); other blocks (text, thinking) are skipped."""
    return [item for item in items or [] if is_tool_call(as_dict(item))]

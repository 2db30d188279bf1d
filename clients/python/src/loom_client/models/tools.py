"""Built-in tool definitions and tool results."""

from __future__ import annotations

from typing import Any

from loom_client.models._base import ResponseModel


class AnthropicTool(ResponseModel):
    """An Anthropic tool definition, ready for the `tools` parameter."""

    name: str
    description: str
    input_schema: dict[str, Any]


class OpenAIFunction(ResponseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class OpenAITool(ResponseModel):
    """An OpenAI function tool, ready for the `tools` parameter of chat completions."""

    type: str = "function"
    function: OpenAIFunction


class ToolList(ResponseModel):
    tools: list[AnthropicTool] | list[OpenAITool]

    def params(self) -> list[dict[str, Any]]:
        """The tools as plain data for a provider SDK's `tools` parameter."""
        return [t.model_dump(mode="json") for t in self.tools]


class ToolResult(ResponseModel):
    """An Anthropic `tool_result` block; `content` is JSON text (the tool's output, or
    `{"error": {...}}` with `is_error` true)."""

    type: str = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False

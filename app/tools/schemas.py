"""Tool API schemas: Anthropic (or OpenAI) tool definitions, tool_use in, tool_result out."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ToolDefinitionPublic(BaseModel):
    """An Anthropic tool definition, ready for the `tools` parameter."""

    name: str
    description: str
    input_schema: dict[str, Any]


class OpenAIFunctionPublic(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class OpenAIToolPublic(BaseModel):
    """An OpenAI function tool, ready for the `tools` parameter of chat completions."""

    type: Literal["function"] = "function"
    function: OpenAIFunctionPublic


class ToolListPublic(BaseModel):
    tools: list[ToolDefinitionPublic] | list[OpenAIToolPublic] = Field(
        description=("Anthropic tool definitions, or OpenAI function tools with `format=openai`.")
    )


class ToolCallCreate(BaseModel):
    """An Anthropic `tool_use` block as the model produced it."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["tool_use"] = "tool_use"
    id: str = Field(min_length=1, max_length=200)
    name: str = Field(max_length=200)
    input: Any = Field(
        default_factory=dict,
        description=(
            "The tool input; anything that is not valid for the tool comes back as a "
            "tool_result with is_error true and code INVALID_PARAMETER."
        ),
    )


class ToolResultPublic(BaseModel):
    """An Anthropic `tool_result` block, ready to send back in a user message.

    `content` is JSON text: the tool's output, or `{"error": {"code", "message",
    "details"}}` with `is_error: true`.
    """

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False

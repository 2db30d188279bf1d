"""Structured output through forced tool use, with the real SDKs against the fake server."""

from __future__ import annotations

import pytest

from app.facts import prompts as p
from app.llm.errors import LLMError
from tests.fakes.llm_server import Fail, FakeLLMServer, Reply, ToolUse
from tests.llm.test_client import anthropic_client, openai_client

ANSWER = {
    "facts": [
        {
            "text": "The user likes jazz.",
            "key": "user.music",
            "importance": 0.6,
            "tags": ["music"],
            "source_seqs": [3],
        }
    ]
}


@pytest.mark.parametrize("make", [anthropic_client, openai_client], ids=["anthropic", "openai"])
async def test_structured_forces_the_tool_and_returns_its_input(
    make, fake_llm: FakeLLMServer
) -> None:
    client = make(fake_llm)
    fake_llm.script(ToolUse(ANSWER))
    try:
        answer = await client.structured(
            p.EXTRACT_SYSTEM,
            "[msg 3 | 2026-03-01 09:00 UTC | user] I like jazz.",
            tool_name=p.EXTRACT_TOOL,
            tool_description=p.EXTRACT_TOOL_DESCRIPTION,
            schema=p.tool_schema(p.CandidatesOut),
            max_tokens=500,
        )
    finally:
        await client.aclose()
    assert p.CandidatesOut.model_validate(answer.data).facts[0].text == "The user likes jazz."
    assert answer.input_tokens > 0 and answer.output_tokens > 0
    [req] = fake_llm.requests
    assert req.tool_name == "record_facts"
    body = req.json
    tools = body["tools"]
    if req.provider == "anthropic":
        assert body["tool_choice"] == {"type": "tool", "name": "record_facts"}
        assert tools[0]["input_schema"]["required"] == ["facts"]
    else:
        assert tools[0]["function"]["parameters"]["required"] == ["facts"]


@pytest.mark.parametrize("make", [anthropic_client, openai_client], ids=["anthropic", "openai"])
async def test_structured_failures_are_llm_errors(make, fake_llm: FakeLLMServer) -> None:
    client = make(fake_llm, llm_max_retries=0)
    fake_llm.script(Reply("no tool, just words"), Fail(529))
    try:
        with pytest.raises(LLMError, match="no record_facts tool call") as first:
            await client.structured(
                "s",
                "p",
                tool_name="record_facts",
                tool_description="d",
                schema={"type": "object"},
                max_tokens=50,
            )
        assert not first.value.retryable
        with pytest.raises(LLMError) as second:
            await client.structured(
                "s",
                "p",
                tool_name="record_facts",
                tool_description="d",
                schema={"type": "object"},
                max_tokens=50,
            )
        assert second.value.retryable
    finally:
        await client.aclose()

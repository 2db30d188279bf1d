"""The summariser: prompt, window splitting, user quotes, heuristic fallback."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.tokens import count_text
from app.llm.client import AnthropicLLM, OpenAICompatLLM
from app.llm.errors import LLMError
from app.memory.llm_summariser import (
    SYSTEM_PROMPT,
    build_prompt,
    render_message,
    split_for_window,
    summarise,
    with_user_quotes,
)
from tests.fakes.llm_server import Empty, Fail, FakeLLMServer, Hang, Malformed, Reply

KEY = "sk-ant-summarise-SECRET"


def conversation(n: int, start: int = 1, words: int = 20) -> list[dict]:
    msgs = []
    for i in range(n):
        seq = start + i
        role = "user" if i % 2 == 0 else "assistant"
        text = f"message {seq} from {role}: " + " ".join(f"word{seq}x{j}" for j in range(words))
        msgs.append({"seq": seq, "role": role, "content": text, "tool_calls": None})
    return msgs


def anthropic(fake: FakeLLMServer, timeout: float = 5.0) -> AnthropicLLM:
    return AnthropicLLM(
        api_key=KEY,
        base_url=fake.base_url,
        model="claude-haiku-4-5",
        rerank_model=None,
        timeout=timeout,
        max_retries=0,
    )


async def test_llm_summary_covers_range_and_asks_for_it(fake_llm: FakeLLMServer) -> None:
    client = anthropic(fake_llm)
    msgs = conversation(4, start=11)
    try:
        draft = await summarise(client, msgs)
    finally:
        await client.aclose()
    assert draft.method == "llm"
    assert (draft.start_seq, draft.end_seq) == (11, 14)
    assert "covers msg:11-14" in draft.text
    assert draft.token_count == count_text(draft.text) + 4  # + message overhead
    [req] = fake_llm.requests
    assert req.covers == (11, 14)
    assert req.system == SYSTEM_PROMPT
    for m in msgs:
        assert f"[msg {m['seq']}] {m['role']}: {m['content']}" in req.text
    assert "FAKE LLM SUMMARY" in draft.text


async def test_user_text_is_kept_verbatim(fake_llm: FakeLLMServer) -> None:
    long_user = "é" * 700 + "TAIL"
    msgs = [
        {"seq": 1, "role": "user", "content": "short ask: deploy to staging"},
        {"seq": 2, "role": "assistant", "content": "ok"},
        {"seq": 3, "role": "user", "content": [{"type": "text", "text": long_user}]},
        {"seq": 4, "role": "assistant", "content": "done"},
    ]
    client = anthropic(fake_llm)
    try:
        draft = await summarise(client, msgs)
    finally:
        await client.aclose()
    assert "short ask: deploy to staging" in draft.text
    assert "é" * 500 in draft.text and "é" * 501 not in draft.text
    assert "TAIL" not in draft.text


async def test_quote_not_repeated_when_llm_already_quoted(fake_llm: FakeLLMServer) -> None:
    fake_llm.respond_with('The user asked "deploy to staging".')
    msgs = [
        {"seq": 5, "role": "user", "content": "deploy to staging"},
        {"seq": 6, "role": "assistant", "content": "deploying"},
    ]
    client = anthropic(fake_llm)
    try:
        draft = await summarise(client, msgs)
    finally:
        await client.aclose()
    assert draft.text.count("deploy to staging") == 1


async def test_tool_calls_are_rendered_for_the_summariser(fake_llm: FakeLLMServer) -> None:
    msgs = [
        {"seq": 1, "role": "user", "content": "weather in Oslo?"},
        {
            "seq": 2,
            "role": "assistant",
            "content": [
                {"type": "text", "text": "checking"},
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "seq": 3,
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "-3C snow"}],
        },
        {
            "seq": 4,
            "role": "assistant",
            "content": "It is -3C with snow.",
            "tool_calls": [{"id": "c2", "name": "log", "input": {"x": 1}}],
        },
    ]
    client = anthropic(fake_llm)
    try:
        await summarise(client, msgs)
    finally:
        await client.aclose()
    text = fake_llm.requests[0].text
    assert 'get_weather id=tu_1: {"city":"Oslo"}' in text
    assert "tool result id=tu_1: -3C snow" in text
    assert '[tool call log id=c2: {"x":1}]' in text


async def test_long_range_is_split_to_fit_the_window(fake_llm: FakeLLMServer) -> None:
    msgs = conversation(40, start=100, words=120)
    limit = 2500
    client = anthropic(fake_llm)
    try:
        draft = await summarise(client, msgs, max_input_tokens=limit)
    finally:
        await client.aclose()
    assert draft.method == "llm"
    assert len(fake_llm.requests) > 1
    ranges = [r.covered for r in fake_llm.requests]
    assert ranges[0][0] == 100 and ranges[-1][1] == 139
    for (_, end), (nxt, _) in zip(ranges, ranges[1:], strict=False):
        assert nxt == end + 1
    for req in fake_llm.requests:
        assert count_text(req.system) + count_text(req.text) <= limit
        assert f"covers msg:{req.covered[0]}-{req.covered[1]}" in draft.text
    assert "[covers msg:100-139]" in draft.text


@pytest.mark.parametrize(
    "action", [Fail(500), Fail(529), Empty(), Malformed("json"), Malformed("shape"), Hang(3)]
)
async def test_llm_trouble_gives_heuristic(
    fake_llm: FakeLLMServer, action: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm.script(action)  # type: ignore[arg-type]
    client = anthropic(fake_llm, timeout=0.3)
    msgs = conversation(4, start=21)
    try:
        draft = await summarise(client, msgs)
    finally:
        await client.aclose()
    assert draft.method == "heuristic"
    assert (draft.start_seq, draft.end_seq) == (21, 24)
    assert "msg:21-24" in caplog.text and "heuristic" in caplog.text
    assert KEY not in caplog.text


async def test_no_client_gives_heuristic() -> None:
    draft = await summarise(None, conversation(2, start=3))
    assert draft.method == "heuristic"
    assert (draft.start_seq, draft.end_seq) == (3, 4)


async def test_fallback_false_reraises_only_retryable(fake_llm: FakeLLMServer) -> None:
    client = anthropic(fake_llm)
    try:
        fake_llm.script(Fail(529))
        with pytest.raises(LLMError):
            await summarise(client, conversation(2), fallback=False)
        fake_llm.script(Fail(401))
        draft = await summarise(client, conversation(2), fallback=False)
        assert draft.method == "heuristic"
        fake_llm.script(Reply("fine"))
        assert (await summarise(client, conversation(2), fallback=False)).method == "llm"
    finally:
        await client.aclose()


async def test_openai_provider_summarises(fake_llm: FakeLLMServer) -> None:
    client = OpenAICompatLLM(
        api_key=None,
        base_url=fake_llm.openai_base_url,
        model="llama",
        rerank_model=None,
        timeout=5,
        max_retries=0,
    )
    try:
        draft = await summarise(client, conversation(4, start=7))
    finally:
        await client.aclose()
    assert draft.method == "llm"
    assert fake_llm.requests_for("openai")[0].covers == (7, 10)


# --- pure helpers ------------------------------------------------------------------------

lengths = st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None)
@given(lengths, st.integers(min_value=1000, max_value=6000))
def test_split_keeps_every_message_once_in_order(sizes: list[int], limit: int) -> None:
    msgs = [{"seq": i, "role": "user", "content": "ab " * n} for i, n in enumerate(sizes)]
    chunks = split_for_window(msgs, limit)
    assert [m["seq"] for chunk, _ in chunks for m in chunk] == list(range(len(sizes)))
    for chunk, transcript in chunks:
        prompt = build_prompt(chunk, transcript)
        assert count_text(SYSTEM_PROMPT) + count_text(prompt) <= limit


def test_render_message_names_seq_and_role() -> None:
    assert render_message({"seq": 9, "role": "user", "content": "hi"}) == "[msg 9] user: hi"


def test_with_user_quotes_ignores_assistant_and_tool_results() -> None:
    msgs = [
        {"seq": 1, "role": "assistant", "content": "assistant words"},
        {
            "seq": 2,
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": "data"}],
        },
    ]
    assert with_user_quotes("S", msgs) == "S"

"""`LoomSession`, the OpenAI Agents SDK's `Session` on a Loom session: against the SDK's own
`SQLiteSession` operation by operation, through `Runner.run` with the SDK's chat-completions
model on the fake LLM server, and read back over Loom's HTTP API."""

import copy
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session, SessionSettings
from loom_client import AsyncLoomClient
from loom_client.adapters.openai_agents import LoomSession
from openai import AsyncOpenAI

from tests.fakes.llm_server import FakeLLMServer, Reply, ToolUse

set_tracing_disabled(True)  # no trace export: the tests reach no network

ITEMS: list[Any] = [
    {"role": "developer", "content": "Answer briefly."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "and this picture?"},
            {"type": "input_image", "image_url": "https://example.test/p.png", "detail": "low"},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "need the weather tool"}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny and 21 C in Paris.", "annotations": []}],
    },
    {"type": "function_call", "call_id": "call_2", "name": "odd", "arguments": "not json"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "x"}},
]


async def messages(arest: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    resp = await arest.get(f"/v1/sessions/{session_id}/messages", params={"limit": 200})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def test_items_round_trip_and_are_loom_messages(
    aloom: AsyncLoomClient, arest: httpx.AsyncClient
):
    session = LoomSession("conv-1", aloom, config={"max_context_tokens": 50_000})
    assert await session.get_items() == []
    assert await session.loom_session_id() is None

    await session.add_items(copy.deepcopy(ITEMS[:4]))
    await session.add_items(copy.deepcopy(ITEMS[4:]))
    assert await session.get_items() == ITEMS
    assert await session.get_items(limit=2) == ITEMS[-2:]
    assert await session.get_items(limit=100) == ITEMS
    assert await session.get_items(limit=0) == []

    loom_id = await session.loom_session_id()
    assert loom_id is not None
    stored = await messages(arest, loom_id)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("system", "Answer briefly."),
        ("user", "What's the weather in Paris?"),
        ("user", "and this picture?\n[image]"),
        ("assistant", "[reasoning] need the weather tool"),
        ("assistant", None),
        ("tool", "sunny, 21 C"),
        ("assistant", "Sunny and 21 C in Paris."),
        ("assistant", None),
        ("assistant", "[web_search_call]"),
    ]
    assert stored[4]["tool_calls"] == [
        {"id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}
    ]
    assert stored[5]["tool_use_id"] == "call_1"
    assert stored[7]["tool_calls"] == [
        {"id": "call_2", "name": "odd", "input": {"arguments": "not json"}}
    ]
    assert [m["metadata"]["openai_agents"]["item"] for m in stored] == ITEMS

    session_row = (await arest.get(f"/v1/sessions/{loom_id}")).json()
    assert session_row["agent_id"] == "agent-1"
    assert session_row["config"]["max_context_tokens"] == 50_000
    assert session_row["metadata"] == {"openai_agents": {"session_id": "conv-1"}}
    mapping = (await arest.get("/v1/shared-memory/agent/openai-agents/sessions/conv-1")).json()
    assert mapping["value"] == {"loom_session_id": loom_id}

    # another instance with the same id sees the same history; another id, none
    assert await LoomSession("conv-1", aloom).get_items() == ITEMS
    assert await LoomSession("conv-2", aloom).get_items() == []
    # and another agent has its own sessions under the same id
    assert await LoomSession("conv-1", aloom.with_agent("agent-2")).get_items() == []


async def test_messages_from_elsewhere_come_back_as_items(aloom: AsyncLoomClient):
    session = LoomSession("conv-x", aloom)
    await session.add_items([{"role": "user", "content": "hi"}])
    loom_id = await session.loom_session_id()
    assert loom_id is not None
    await aloom.append_messages(
        loom_id,
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "tu_1", "name": "look", "input": {"q": 1}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "found"}],
            },
        ],
    )
    assert await session.get_items() == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "calling"},
        {"type": "function_call", "call_id": "tu_1", "name": "look", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": "tu_1", "output": "found"},
    ]


async def same_steps(session: Session) -> list[Any]:
    """One script of the protocol's operations; what each returned."""
    out: list[Any] = [await session.get_items(), await session.pop_item()]
    await session.add_items(copy.deepcopy(ITEMS[:3]))
    out += [await session.get_items(), await session.get_items(limit=1)]
    out.append(await session.pop_item())
    out.append(await session.get_items())
    await session.add_items(copy.deepcopy(ITEMS[3:7]))
    out += [await session.get_items(limit=3), await session.pop_item(), await session.pop_item()]
    out.append(await session.get_items())
    await session.clear_session()
    out += [await session.get_items(), await session.pop_item()]
    await session.add_items([copy.deepcopy(ITEMS[1])])
    out += [await session.get_items(), await session.pop_item(), await session.get_items()]
    await session.clear_session()
    return out


async def test_behaves_as_the_sdks_sqlite_session(aloom: AsyncLoomClient):
    sqlite = SQLiteSession("same")
    try:
        expected = await same_steps(sqlite)
    finally:
        sqlite.close()
    assert await same_steps(LoomSession("same", aloom)) == expected
    assert expected[2] == ITEMS[:3] and expected[-3] == [ITEMS[1]]  # the script did things

    settings = SessionSettings(limit=2)
    limited = LoomSession("lim", aloom, session_settings=settings)
    await limited.add_items(copy.deepcopy(ITEMS[:5]))
    assert await limited.get_items() == ITEMS[3:5]
    assert await limited.get_items(limit=4) == ITEMS[1:5]


async def test_pop_item_copies_the_rest_to_a_new_loom_session(
    aloom: AsyncLoomClient, arest: httpx.AsyncClient
):
    session = LoomSession("pop", aloom, user_id="u-7", rom={"system_prompt": "Be kind."})
    await session.add_items(copy.deepcopy(ITEMS))
    old_id = await session.loom_session_id()
    assert old_id is not None
    before = await messages(arest, old_id)

    assert await session.pop_item() == ITEMS[-1]
    new_id = await session.loom_session_id()
    assert new_id is not None and new_id != old_id
    assert (await arest.get(f"/v1/sessions/{old_id}")).status_code == 404
    after = await messages(arest, new_id)
    assert [(m["seq"], m["role"], m["content"], m["created_at"]) for m in after] == [
        (m["seq"], m["role"], m["content"], m["created_at"]) for m in before[:-1]
    ]
    assert (await arest.get(f"/v1/sessions/{new_id}")).json()["user_id"] == "u-7"
    built = (await arest.post(f"/v1/sessions/{new_id}/context", json={"format": "raw"})).json()
    assert built["layers"]["rom"]["text"] == "Be kind."
    assert await session.get_items() == ITEMS[:-1]

    await session.clear_session()
    assert (await arest.get(f"/v1/sessions/{new_id}")).status_code == 404
    assert (
        await arest.get("/v1/shared-memory/agent/openai-agents/sessions/pop")
    ).status_code == 404
    assert await session.get_items() == []
    assert await session.loom_session_id() is None


async def test_context_items_are_the_built_context(aloom: AsyncLoomClient):
    session = LoomSession(
        "long",
        aloom,
        rom={"system_prompt": "You are the long-run agent."},
        config={"max_context_tokens": 4000, "l1_max_messages": 4},
    )
    turns: list[Any] = []
    for i in range(10):
        turns.append({"role": "user", "content": f"question {i} about segmented memory"})
        turns.append(
            {
                "type": "message",
                "id": f"msg_{i}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"answer {i}", "annotations": []}],
            }
        )
    await session.add_items(copy.deepcopy(turns))

    built = await session.context_items()
    assert built[0]["role"] == "system"  # type: ignore[typeddict-item]
    assert "You are the long-run agent." in built[0]["content"]  # type: ignore[typeddict-item]
    assert built[-4:] == turns[-4:]  # the newest turns, as added
    assert len(built) < len(turns)
    assert all(item in turns for item in built[1:])

    in_context = LoomSession("long", aloom, context=True)
    assert await in_context.get_items() == built
    assert await in_context.get_items(limit=3) == turns[-3:]  # a limit reads the history


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def agent(fake: FakeLLMServer, **settings: Any) -> Agent:
    model = OpenAIChatCompletionsModel(
        model="fake-model",
        openai_client=AsyncOpenAI(base_url=fake.openai_base_url, api_key="sk-test", max_retries=0),
    )
    return Agent(
        name="weather",
        instructions="You answer weather questions.",
        model=model,
        tools=[get_weather],
        model_settings=ModelSettings(**settings),
    )


async def test_runner_keeps_a_runs_history_in_loom(
    aloom: AsyncLoomClient, arest: httpx.AsyncClient, fake_llm: FakeLLMServer
):
    session = LoomSession("run-1", aloom)
    fake_llm.script(ToolUse({"city": "Paris"}), Reply("It is sunny in Paris."))
    first = await Runner.run(
        agent(fake_llm, tool_choice="get_weather"),
        "Weather in Paris?",
        session=session,
        max_turns=3,
    )
    assert first.final_output == "It is sunny in Paris."

    items = await session.get_items()
    kinds = [i.get("type") or i.get("role") for i in items]
    assert kinds == ["user", "function_call", "function_call_output", "message"]
    assert items[2]["output"] == "sunny in Paris"  # type: ignore[typeddict-item]

    fake_llm.script(Reply("Still sunny."))
    second = await Runner.run(agent(fake_llm), "And tomorrow?", session=session)
    assert second.final_output == "Still sunny."
    # the model got the first run's history from Loom
    sent = fake_llm.requests_for("openai")[-1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[3]["content"] == "sunny in Paris"

    loom_id = await session.loom_session_id()
    assert loom_id is not None
    stored = await messages(arest, loom_id)
    roles = ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [m["role"] for m in stored] == roles
    assert stored[1]["tool_calls"][0]["name"] == "get_weather"
    assert stored[-1]["content"] == "Still sunny."


async def test_runner_with_the_built_context(aloom: AsyncLoomClient, fake_llm: FakeLLMServer):
    session = LoomSession(
        "run-long",
        aloom,
        rom={"system_prompt": "Loom ROM: keep answers short."},
        config={"max_context_tokens": 4000, "l1_max_messages": 4},
        context=True,
    )
    for i in range(6):
        fake_llm.script(Reply(f"answer {i}"))
        await Runner.run(agent(fake_llm), f"question {i}", session=session)
    sent = fake_llm.requests_for("openai")[-1].json["messages"]
    assert sent[0] == {"role": "system", "content": "You answer weather questions."}
    assert sent[1]["role"] == "system"
    loom_system = sent[1]["content"]
    assert loom_system.startswith("Loom ROM: keep answers short.\n\n")
    assert "## Earlier conversation (summaries)" in loom_system and "question 0" in loom_system
    assert sent[2:] == [  # L1 (the newest 4 turns), then the new question
        {"role": "user", "content": "question 3"},
        {"role": "assistant", "content": "answer 3"},
        {"role": "user", "content": "question 4"},
        {"role": "assistant", "content": "answer 4"},
        {"role": "user", "content": "question 5"},
    ]
    # the history in Loom is whole: 6 questions and 6 answers, nothing of the context
    history = await LoomSession("run-long", aloom).get_items()
    assert [i.get("role") for i in history] == ["user", "assistant"] * 6


async def test_a_loom_session_deleted_elsewhere_is_replaced(
    aloom: AsyncLoomClient, arest: httpx.AsyncClient
):
    session = LoomSession("erased", aloom)
    await session.add_items([{"role": "user", "content": "first"}])
    old_id = await session.loom_session_id()
    assert (await arest.delete(f"/v1/sessions/{old_id}")).status_code == 204
    assert await session.get_items() == []
    await session.add_items([{"role": "user", "content": "second"}])
    new_id = await session.loom_session_id()
    assert new_id is not None and new_id != old_id
    assert await session.get_items() == [{"role": "user", "content": "second"}]
    assert [m["content"] for m in await messages(arest, new_id)] == ["second"]


def test_a_session_id_is_required(aloom: AsyncLoomClient):
    with pytest.raises(ValueError, match="non-empty"):
        LoomSession("", aloom)

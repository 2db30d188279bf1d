"""An OpenAI Agents SDK agent whose conversation lives in a Loom session (`LoomSession`; no
LLM key: a stand-in model implements the SDK's `Model` interface, so nothing leaves the
machine).

Three runs share one session: the first calls a tool, the later ones see the earlier turns
because `Runner.run` reads them back from Loom. Then a long conversation with
`context=True`: the model gets Loom's built context (summaries of older turns, then the
newest turns) instead of the whole history.

    export LOOM_URL=http://127.0.0.1:8420 LOOM_KEY=<service key>
    .venv/bin/python examples/openai_agents_session.py

Needs the client with its extra: pip install -e "./clients/python[openai-agents]"
(./scripts/test installs it). With a real model, drop `model=ScriptedModel()`.
"""

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, NoReturn

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from loom_client import (
    AsyncLoomClient,
    BadRequest,
    Forbidden,
    LoomConnectionError,
    Unauthorized,
)
from loom_client.adapters.openai_agents import LoomSession
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

URL = os.environ.get("LOOM_URL", "http://127.0.0.1:8420")
KEY = os.environ.get("LOOM_KEY", "")
AGENT = "agents-sdk-example"
HOW_TO_GET_A_KEY = """\
Set LOOM_KEY to a service key of a tenant, e.g. (with ./scripts/serve running):

    export LOOM_KEY=$(.venv/bin/loom-memory create-key --role service --tenant-name demo \\
        | python3 -c 'import sys,json; print(json.load(sys.stdin)["secret"])')

(README, "Tenants and keys", makes one over HTTP.) LOOM_URL is {url}."""


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(2)


async def check_setup(loom: AsyncLoomClient) -> None:
    """Exit 2 with what to do, not a traceback, when the key or the server is missing."""
    if not KEY:
        fail(HOW_TO_GET_A_KEY.format(url=URL))
    try:
        await loom.list_sessions(limit=1)
    except LoomConnectionError as exc:
        fail(f"Cannot reach Loom Memory at {URL} ({exc}): start it with ./scripts/serve, "
             "or set LOOM_URL.")
    except (Unauthorized, Forbidden, BadRequest) as exc:  # 400: an admin key, no tenant
        fail(f"{URL} refused LOOM_KEY ({exc.status}: {exc.message})\n"
             + HOW_TO_GET_A_KEY.format(url=URL))


@function_tool
def order_status(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} left the warehouse today"


def _text(item: Any) -> str:
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


class ScriptedModel(Model):
    """Stands in for an LLM: asks `order_status` when a message names an order, answers
    from a tool result, else says how much of the conversation it was given."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, system_instructions: str | None,
                           input: str | list[TResponseInputItem], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        self.calls += 1
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) \
            else list(input)
        last = items[-1]
        if last.get("type") == "function_call_output":
            return self._say(f"Good news: {last['output']}.")
        words = _text(last).split()
        if "order" in words:
            order = words[words.index("order") + 1].strip("?.!")
            return ModelResponse(output=[ResponseFunctionToolCall(
                type="function_call", call_id=f"call_{self.calls}", name="order_status",
                arguments=f'{{"order_id": "{order}"}}', id=f"fc_{self.calls}",
                status="completed")], usage=Usage(), response_id=None)
        summary = next((i for i in items if i.get("role") == "system"
                        and "Earlier conversation" in _text(i)), None)
        return self._say(f"I was given {len(items)} items"
                         + (" including Loom's summary of older turns." if summary else "."))

    def _say(self, text: str) -> ModelResponse:
        message = ResponseOutputMessage(
            type="message", id=f"msg_{self.calls}", role="assistant", status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any
                              ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("this stand-in model does not stream")
        yield  # pragma: no cover


async def main() -> None:
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI
    async with AsyncLoomClient(URL, KEY, agent_id=AGENT) as loom:
        await check_setup(loom)
        agent = Agent(name="support", instructions="You help with orders.",
                      model=ScriptedModel(), tools=[order_status])

        session = LoomSession("customer-42", loom, user_id="customer-42")
        await session.clear_session()  # start fresh each time the example runs
        for question in ["Where is order A-17?", "Thanks! Anything else?", "Bye"]:
            result = await Runner.run(agent, question, session=session)
            print(f"user: {question} -> agent: {result.final_output}")
        items = await session.get_items()
        loom_id = await session.loom_session_id()
        print(f"loom session {loom_id}: {len(items)} items:",
              [i.get("type") or i.get("role") for i in items])

        # a long run: the model gets Loom's built context, not the whole history
        long_run = LoomSession("long-run", loom, context=True,
                               config={"max_context_tokens": 4000, "l1_max_messages": 6})
        await long_run.clear_session()
        for n in range(12):
            result = await Runner.run(agent, f"note {n}: keep going", session=long_run)
        history = await LoomSession("long-run", loom).get_items()
        print(f"long run: {len(history)} items in Loom; last answer: {result.final_output}")


if __name__ == "__main__":
    asyncio.run(main())

"""A short agent loop on the Python client (`loom_client`; no LLM key needed).

It creates a session with a small window, appends turns with parallel tool calls, and
prints the Anthropic-format context it would send each turn, with tokens per layer. The
context comes back as the Anthropic SDK's keyword arguments (`system`, `messages`, `tools`),
so a real agent passes it straight on; here a stand-in model answers instead.

    LOOM_URL=http://127.0.0.1:8420 LOOM_KEY=<service key> .venv/bin/python examples/agent_loop.py

The client lives in clients/python; ./scripts/serve installs it into .venv.
"""

import json
import os
import sys
from typing import Any, NoReturn

from loom_client import BadRequest, Forbidden, LoomClient, LoomConnectionError, Unauthorized

URL = os.environ.get("LOOM_URL", "http://127.0.0.1:8420")
KEY = os.environ.get("LOOM_KEY", "")
AGENT = "example-agent"
HOW_TO_GET_A_KEY = """\
Set LOOM_KEY to a service key of a tenant, e.g. (with ./scripts/serve running):

    export LOOM_KEY=$(.venv/bin/loom-memory create-key --role service --tenant-name demo \\
        | python3 -c 'import sys,json; print(json.load(sys.stdin)["secret"])')

(README, "Tenants and keys", makes one over HTTP.) LOOM_URL is {url}."""
LOOKUP = {"name": "lookup", "description": "Look something up",
          "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(2)


def check_setup(loom: LoomClient) -> None:
    """Exit 2 with what to do, not a traceback, when the key or the server is missing."""
    if not KEY:
        fail(HOW_TO_GET_A_KEY.format(url=URL))
    try:
        loom.list_sessions(limit=1)
    except LoomConnectionError as exc:
        fail(f"Cannot reach Loom Memory at {URL} ({exc}): start it with ./scripts/serve, "
             "or set LOOM_URL.")
    except (Unauthorized, Forbidden, BadRequest) as exc:  # 400: an admin key, no tenant
        fail(f"{URL} refused LOOM_KEY ({exc.status}: {exc.message})\n"
             + HOW_TO_GET_A_KEY.format(url=URL))


def fake_model(n: int, question: str) -> list[dict[str, Any]]:
    """Stand-in for an LLM: one round of two parallel tool calls, then an answer."""
    calls = [{"id": f"call_{n}_{i}", "name": "lookup", "input": {"q": question}} for i in (1, 2)]
    return [
        {"role": "assistant", "content": "Looking that up.", "tool_calls": calls},
        *[{"role": "tool", "tool_call_id": c["id"], "content": f"result for {c['id']}"}
          for c in calls],
        {"role": "assistant", "content": f"Here is what I found about {question!r}."},
    ]


def main() -> None:
    with LoomClient(URL, KEY, agent_id=AGENT) as loom:
        check_setup(loom)
        loom.put_profile(AGENT, "You are a concise research assistant.")
        session = loom.create_session(config={"max_context_tokens": 2000,
                                              "reserved_output_tokens": 200})
        loom.put_kernel_tools(session.id, [LOOKUP])
        for n in range(15):
            question = f"question {n}: " + "tell me about segmented memory " * 5
            # an Idempotency-Key per append: a retried request never appends twice
            loom.append_messages(session.id, [{"role": "user", "content": question}],
                                 idempotency_key=f"turn-{n}-question")
            ctx = loom.context(session.id, format="anthropic")
            built = ctx.response
            print(f"turn {n}: {built.total_tokens}/{built.budget} tokens "
                  f"(usage {built.usage:.2f}) layers={built.tokens} "
                  f"pending={built.compression.pending}")
            # a real agent: anthropic.Anthropic().messages.create(model=..., max_tokens=200,
            # **ctx), then loom.execute_tool_calls(session.id, reply.content) for the
            # built-in memory tools
            loom.append_messages(session.id, fake_model(n, question),
                                 idempotency_key=f"turn-{n}-answer")
        # tools first: the system prompt grows with the summaries and is cut short here
        print(json.dumps({k: ctx[k] for k in ("tools", "system")}, indent=2)[:2000])
        kept = loom.get_session(session.id).message_count
        print(f"session {session.id}: all {kept} messages kept in swap; the last context "
              f"sent {len(ctx['messages'])} of them within {built.budget} tokens")


if __name__ == "__main__":
    main()

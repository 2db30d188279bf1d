"""A short agent loop over plain HTTP (no SDK, no LLM key needed).

It creates a session with a small window, appends turns with parallel tool calls, and
prints the Anthropic-format context it would send each turn, with tokens per layer.

    LOOM_URL=http://127.0.0.1:8420 LOOM_KEY=<service key> python examples/agent_loop.py
"""

import json
import os
import sys
from typing import NoReturn

import httpx

URL = os.environ.get("LOOM_URL", "http://127.0.0.1:8420")
KEY = os.environ.get("LOOM_KEY", "")
HEADERS = {"Authorization": f"Bearer {KEY}", "X-Agent-Id": "example-agent"}
HOW_TO_GET_A_KEY = """\
Set LOOM_KEY to a service key of a tenant, e.g. (with ./scripts/serve running):

    export LOOM_KEY=$(.venv/bin/loom-memory create-key --role service --tenant-name demo \\
        | python3 -c 'import sys,json; print(json.load(sys.stdin)["secret"])')

(README, "Tenants and keys", makes one over HTTP.) LOOM_URL is {url}."""


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(2)


def check_setup(http: httpx.Client) -> None:
    """Exit 2 with what to do, not a traceback, when the key or the server is missing."""
    if not KEY:
        fail(HOW_TO_GET_A_KEY.format(url=URL))
    try:
        r = http.get("/v1/sessions", params={"limit": 1})
    except httpx.TransportError as exc:
        fail(f"Cannot reach Loom Memory at {URL} ({exc}): start it with ./scripts/serve, "
             "or set LOOM_URL.")
    if r.status_code in (401, 403):
        fail(f"{URL} refused LOOM_KEY ({r.status_code}: {r.json()['error']['message']})\n"
             + HOW_TO_GET_A_KEY.format(url=URL))


def fake_model(n: int, question: str) -> list[dict]:
    """Stand-in for an LLM: one tool round, then an answer."""
    calls = [{"id": f"call_{n}_{i}", "name": "lookup", "input": {"q": question}} for i in (1, 2)]
    return [
        {"role": "assistant", "content": "Looking that up.", "tool_calls": calls},
        *[{"role": "tool", "tool_call_id": c["id"], "content": f"result for {c['id']}"}
          for c in calls],
        {"role": "assistant", "content": f"Here is what I found about {question!r}."},
    ]


def main() -> None:
    with httpx.Client(base_url=URL, headers=HEADERS, timeout=30) as http:
        check_setup(http)
        http.put("/v1/agents/example-agent/profile",
                 json={"system_prompt": "You are a concise research assistant."})
        sid = http.post("/v1/sessions", json={"config": {
            "max_context_tokens": 2000, "reserved_output_tokens": 200}}).json()["id"]
        http.put(f"/v1/sessions/{sid}/kernel/tools", json={"tools": [
            {"name": "lookup", "description": "Look something up",
             "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]})
        for n in range(15):
            question = f"question {n}: " + "tell me about segmented memory " * 5
            http.post(f"/v1/sessions/{sid}/messages",
                      json={"messages": [{"role": "user", "content": question}]})
            ctx = http.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"}).json()
            print(f"turn {n}: {ctx['total_tokens']}/{ctx['budget']} tokens "
                  f"(usage {ctx['usage']:.2f}) layers={ctx['tokens']} "
                  f"pending={ctx['compression']['pending']}")
            # here a real agent would call the Messages API with system/messages/tools
            http.post(f"/v1/sessions/{sid}/messages",
                      json={"messages": fake_model(n, question)})
        print(json.dumps({k: ctx[k] for k in ("system", "tools")}, indent=2)[:2000])


if __name__ == "__main__":
    main()

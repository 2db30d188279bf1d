"""Claude's `memory` tool with its files in Loom shared memory (`LoomMemoryTool`; no LLM key).

The tool calls below are what Claude sends (`tool_use` inputs of the `memory` tool); here
they are played without a model, through the SDK's own dispatch (`tool.call`). A real agent
hands the tool to the SDK's runner instead:

    runner = anthropic.Anthropic().beta.messages.tool_runner(
        model=MODEL, max_tokens=1024, tools=[memory], messages=[...])

    export LOOM_URL=http://127.0.0.1:8420 LOOM_KEY=<service key>
    .venv/bin/python examples/claude_memory_tool.py

Needs the client with its extra: pip install -e "./clients/python[claude]"
(./scripts/test installs it).
"""

import os
import sys
from typing import Any, NoReturn

from anthropic.lib.tools import ToolError
from loom_client import BadRequest, Forbidden, LoomClient, LoomConnectionError, Unauthorized
from loom_client.adapters.claude_memory import LoomMemoryTool

URL = os.environ.get("LOOM_URL", "http://127.0.0.1:8420")
KEY = os.environ.get("LOOM_KEY", "")
AGENT = "claude-example"
HOW_TO_GET_A_KEY = """\
Set LOOM_KEY to a service key of a tenant, e.g. (with ./scripts/serve running):

    export LOOM_KEY=$(.venv/bin/loom-memory create-key --role service --tenant-name demo \\
        | python3 -c 'import sys,json; print(json.load(sys.stdin)["secret"])')

(README, "Tenants and keys", makes one over HTTP.) LOOM_URL is {url}."""
CALLS: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/customer/preferences.md",
     "file_text": "- prefers email\n- metric units\n"},
    {"command": "str_replace", "path": "/memories/customer/preferences.md",
     "old_str": "prefers email", "new_str": "prefers phone calls"},
    {"command": "insert", "path": "/memories/customer/preferences.md", "insert_line": 2,
     "insert_text": "- timezone: Europe/Lisbon"},
    {"command": "create", "path": "/memories/progress.md", "file_text": "ticket 1182: open\n"},
    {"command": "rename", "old_path": "/memories/progress.md",
     "new_path": "/memories/tickets/1182.md"},
    {"command": "view", "path": "/memories/customer/preferences.md"},
    {"command": "view", "path": "/memories/../../etc/passwd"},  # refused
    {"command": "delete", "path": "/memories/tickets"},
    {"command": "view", "path": "/memories"},
]


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


def main() -> None:
    with LoomClient(URL, KEY, agent_id=AGENT) as loom:
        check_setup(loom)
        memory = LoomMemoryTool.for_agent(loom)  # private to this agent
        memory.clear_all_memory()  # start fresh each time the example runs
        for call in CALLS:
            try:
                result = memory.call(call)
            except ToolError as exc:  # the runner sends it back as an is_error tool result
                result = f"ERROR {exc}"
            print(f"> {call['command']} {call.get('path') or call.get('old_path')}\n{result}")

        # one user's memory, shared by every agent of the tenant that works with them
        ann = LoomMemoryTool.for_user(loom, "ann")
        ann.clear_all_memory()
        ann.call({"command": "create", "path": "/memories/diet.md", "file_text": "vegetarian\n"})
        other_agent = LoomMemoryTool.for_user(loom.with_agent("another-agent"), "ann")
        print("another agent reads ann's memory:",
              repr(other_agent.call({"command": "view", "path": "/memories/diet.md"})))
        keys = [k.key for k in loom.iter_shared_memory_keys("agent", prefix="claude-memory/")]
        print(f"stored in shared memory `agent` of {AGENT}: {keys}")


if __name__ == "__main__":
    main()

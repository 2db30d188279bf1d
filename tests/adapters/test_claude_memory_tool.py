"""`LoomMemoryTool` / `AsyncLoomMemoryTool`, Claude's `memory` tool on Loom shared memory:
every command next to the `anthropic` SDK's own filesystem backend, path traversal refused,
the scopes kept apart, and one tool-runner round through the real SDK against the fake
Messages API; what is stored is read back over Loom's HTTP API."""

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anthropic
import httpx
import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool
from loom_client import AsyncLoomClient, LoomClient
from loom_client.adapters.claude_memory import AsyncLoomMemoryTool, LoomMemoryTool

from tests.fakes.llm_server import FakeLLMServer, Reply, ToolUse

# one session of commands: (input, whether a directory view) in order
SCRIPT: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "one\ntwo\nthree\n"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
    {"command": "create", "path": "/memories/proj/a/b/deep.md", "file_text": "deep\n"},
    {"command": "create", "path": "/memories/proj/plan.md", "file_text": "step 1\nstep 2\n"},
    {"command": "create", "path": "/memories/.hidden", "file_text": "h"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
    {"command": "view", "path": "/memories/missing.md"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "two", "new_str": "2"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "zzz", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/proj/plan.md", "old_str": "step", "new_str": "s"},
    {"command": "str_replace", "path": "/memories/nope.md", "old_str": "a", "new_str": "b"},
    {"command": "str_replace", "path": "/memories/proj", "old_str": "a", "new_str": "b"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "zero\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 4, "insert_text": "four"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 9, "insert_text": "x"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/n/notes.md"},
    {"command": "rename", "old_path": "/memories/proj", "new_path": "/memories/project"},
    {"command": "rename", "old_path": "/memories/gone", "new_path": "/memories/x"},
    {"command": "rename", "old_path": "/memories/project", "new_path": "/memories/n"},
    {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
    {"command": "view", "path": "/memories/project/plan.md"},
    {"command": "view", "path": "/memories/project/a/b/deep.md"},
    {"command": "delete", "path": "/memories/project/a"},
    {"command": "delete", "path": "/memories/project/a"},
    {"command": "delete", "path": "/memories"},
    {"command": "delete", "path": "/memories/project/gone.md"},
]
DIRECTORY_VIEWS = [
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/"},
    {"command": "view", "path": "/memories/project"},
]


def outcome(tool: Any, command: dict[str, Any]) -> str:
    try:
        return str(tool.call(command))
    except ToolError as exc:
        return f"error: {exc}"


def names(view: str) -> list[str]:
    """A directory view without sizes (a filesystem directory's size is its inode's) and
    without the filesystem backend's `//` after a path given with a trailing `/`."""
    return [line.split("\t", 1)[-1].replace("//", "/") for line in view.splitlines()]


def test_every_command_answers_as_the_sdks_filesystem_backend(loom: LoomClient, tmp_path: Path):
    local = BetaLocalFilesystemMemoryTool(str(tmp_path))
    ours = LoomMemoryTool.for_agent(loom)
    for command in SCRIPT:
        expected, got = outcome(local, command), outcome(ours, command)
        if command["command"] == "view" and expected.startswith("Here're"):
            assert names(got) == names(expected), command
        else:
            assert got == expected, command
    for command in DIRECTORY_VIEWS:
        assert names(outcome(ours, command)) == names(outcome(local, command)), command
    # the script did things: a listing after the renames and deletes
    assert names(outcome(ours, {"command": "view", "path": "/memories"}))[2:] == [
        "/memories/n/",
        "/memories/n/notes.md",
        "/memories/project/",
        "/memories/project/plan.md",
    ]
    # the one difference: a directory is a key prefix, so it goes with its last file
    ours.call({"command": "delete", "path": "/memories/n/notes.md"})
    with pytest.raises(ToolError, match="does not exist"):
        ours.call({"command": "view", "path": "/memories/n"})


def stored(rest: httpx.Client, key: str, namespace: str = "agent", **params: str) -> Any:
    return rest.get(f"/v1/shared-memory/{namespace}/{quote(key, safe='/')}", params=params)


def keys(rest: httpx.Client, namespace: str = "agent", **params: str) -> list[str]:
    resp = rest.get(f"/v1/shared-memory/{namespace}", params={"limit": 1000, **params})
    assert resp.status_code == 200, resp.text
    return [k["key"] for k in resp.json()["items"]]


def test_files_are_shared_memory_text_entries(loom: LoomClient, rest: httpx.Client):
    tool = LoomMemoryTool.for_agent(loom)
    tool.call({"command": "create", "path": "/memories/prefs/units.md", "file_text": "metric\n"})
    resp = stored(rest, "claude-memory/prefs/units.md")
    assert resp.status_code == 200
    assert resp.text == "metric\n"
    assert resp.headers["content-type"].startswith("text/plain")
    tool.call(
        {
            "command": "str_replace",
            "path": "/memories/prefs/units.md",
            "old_str": "metric",
            "new_str": "metric, 24h clock",
        }
    )
    assert stored(rest, "claude-memory/prefs/units.md").text == "metric, 24h clock\n"
    tool.call(
        {"command": "rename", "old_path": "/memories/prefs", "new_path": "/memories/settings"}
    )
    assert keys(rest) == ["claude-memory/settings/units.md"]
    assert tool.clear_all_memory() == "All memory cleared"
    assert keys(rest) == []


BAD_PATHS = [
    "/memories/../etc/passwd",
    "/memories/a/../../b",
    "/memories/./x",
    "/memories/a/..",
    "/memories//x",
    "/etc/passwd",
    "//memories/x",
    "/memoriesX/x",
    "memories/x",
    "../memories/x",
    "/memories\\..\\x",
    "/memories/%2e%2e/x",
    "/memories/%2E%2e%2Fetc",
    "/memories/a%2Fb",
    "/memories/．．/x",
    "/memories/a／b",
    "/memories/‥/x",
    "/memories/a\x00b",
    "/memories/a\nb",
    "/memories/a\u200bb",
    "file:///memories/x",
    "~/memories/x",
    "",
    "/memories/" + "x" * 300,
]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_path_traversal_and_tricks_are_refused(loom: LoomClient, rest: httpx.Client, path: str):
    tool = LoomMemoryTool.for_agent(loom)
    commands = [
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/ok"},
        {"command": "rename", "old_path": "/memories/ok", "new_path": path},
    ]
    for command in commands:
        with pytest.raises(ToolError) as refused:
            tool.call(command)
        message = str(refused.value)
        assert re.search(
            r"escape|must start with|backslash|percent-encoded|dots or slashes|control or "
            r"invisible|required|too long",
            message,
        ), (command, message)
    assert keys(rest) == [] and keys(rest, "global") == []


def test_a_missing_argument_is_a_tool_error(loom: LoomClient):
    tool = LoomMemoryTool.for_agent(loom)
    with pytest.raises(ToolError, match="`path` is required"):
        tool.call({"command": "view"})
    with pytest.raises(ToolError, match="must be a string"):
        tool.call({"command": "create", "path": "/memories/x", "file_text": 3})
    with pytest.raises(ToolError, match="is a file, not a directory"):
        tool.call({"command": "create", "path": "/memories/f", "file_text": "x"})
        tool.call({"command": "create", "path": "/memories/f/g", "file_text": "x"})
    with pytest.raises(ToolError, match="into itself"):
        tool.call({"command": "create", "path": "/memories/d/x", "file_text": "x"})
        tool.call({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/d/e"})


@pytest.mark.parametrize("path", ["/memories/trailing ", "/memories/odd\u2065char"])
def test_a_key_loom_refuses_is_a_tool_error(loom: LoomClient, rest: httpx.Client, path: str):
    tool = LoomMemoryTool.for_agent(loom)
    for command in (
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "delete", "path": path},
    ):
        with pytest.raises(ToolError, match="refused|cannot be stored"):
            tool.call(command)
    assert keys(rest) == []


def test_scopes_per_agent_and_per_user(loom: LoomClient, rest: httpx.Client):
    mine = LoomMemoryTool.for_agent(loom)
    theirs = LoomMemoryTool.for_agent(loom.with_agent("agent-2"))
    mine.call({"command": "create", "path": "/memories/who.md", "file_text": "agent-1"})
    with pytest.raises(ToolError, match="does not exist"):
        theirs.call({"command": "view", "path": "/memories/who.md"})
    theirs.call({"command": "create", "path": "/memories/who.md", "file_text": "agent-2"})
    assert "agent-1" in str(mine.call({"command": "view", "path": "/memories/who.md"}))

    ann = LoomMemoryTool.for_user(loom, "ann@example.com")
    ann_elsewhere = LoomMemoryTool.for_user(loom.with_agent("agent-2"), "ann@example.com")
    bob = LoomMemoryTool.for_user(loom, "bob")
    ann.call({"command": "create", "path": "/memories/diet.md", "file_text": "vegetarian"})
    assert "vegetarian" in str(ann_elsewhere.call({"command": "view", "path": "/memories/diet.md"}))
    assert names(str(bob.call({"command": "view", "path": "/memories"})))[1:] == ["/memories"]
    assert keys(rest, "global") == ["claude-memory/users/ann%40example%2Ecom/diet.md"]

    scoped = LoomMemoryTool(loom, namespace="workflow", scope_id="case-9", root="mem")
    scoped.call({"command": "create", "path": "/memories/x.md", "file_text": "case"})
    assert stored(rest, "mem/x.md", "workflow", scope_id="case-9").text == "case"
    with pytest.raises(ValueError, match="root"):
        LoomMemoryTool(loom, root="a/../b")


async def test_the_async_tool(aloom: AsyncLoomClient, arest: httpx.AsyncClient, tmp_path: Path):
    local = BetaLocalFilesystemMemoryTool(str(tmp_path))
    tool = AsyncLoomMemoryTool.for_agent(aloom)
    for command in SCRIPT:
        try:
            got = str(await tool.call(command))
        except ToolError as exc:
            got = f"error: {exc}"
        expected = outcome(local, command)
        if command["command"] == "view" and expected.startswith("Here're"):
            assert names(got) == names(expected), command
        else:
            assert got == expected, command
    with pytest.raises(ToolError, match="escape"):
        await tool.call({"command": "view", "path": "/memories/../x"})
    resp = await arest.get("/v1/shared-memory/agent", params={"prefix": "claude-memory/"})
    assert [k["key"] for k in resp.json()["items"]] == [
        "claude-memory/.hidden",
        "claude-memory/n/notes.md",
        "claude-memory/project/plan.md",
    ]
    assert await tool.clear_all_memory() == "All memory cleared"


def test_a_tool_runner_round_through_the_sdk(
    loom: LoomClient, rest: httpx.Client, fake_llm: FakeLLMServer
):
    memory = LoomMemoryTool.for_agent(loom)
    fake_llm.script(
        ToolUse({"command": "view", "path": "/memories/../../etc/passwd"}),
        ToolUse({"command": "create", "path": "/memories/prefs.md", "file_text": "metric\n"}),
        Reply("Noted: metric units."),
    )
    client = anthropic.Anthropic(base_url=fake_llm.base_url, api_key="sk-test", max_retries=0)
    runner = client.beta.messages.tool_runner(
        model="claude-fake",
        max_tokens=256,
        tools=[memory],
        tool_choice={"type": "tool", "name": "memory"},
        messages=[{"role": "user", "content": "Remember that I use metric units."}],
    )
    replies = list(runner)
    assert replies[-1].content[0].text == "Noted: metric units."  # type: ignore[union-attr]

    requests = fake_llm.requests_for("anthropic")
    assert len(requests) == 3
    assert requests[0].json["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    refused = requests[1].json["messages"][-1]["content"][0]
    assert refused["is_error"] is True
    assert "would escape /memories" in str(refused["content"])
    created = requests[2].json["messages"][-1]["content"][0]
    assert created.get("is_error") is not True
    assert "File created successfully at: /memories/prefs.md" in str(created["content"])
    assert stored(rest, "claude-memory/prefs.md").text == "metric\n"

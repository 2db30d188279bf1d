"""The examples: they run end to end against a live server (`./scripts/serve`'s API and
worker, on the test database), and tell a newcomer what to set instead of ending in a
traceback."""

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.core.config import Settings
from tests.support.live import free_port, live_api

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# the examples import `loom_client`; from its source tree, like tests/client, so the run
# needs no install (scripts/test and scripts/serve install it for people)
CLIENT_SRC = ROOT / "clients" / "python" / "src"
# every example with the variable holding its key
EXAMPLES = [
    ("agent_loop.py", "LOOM_KEY"),
    ("dnd_party.py", "LOOM_ADMIN_KEY"),
    # the framework adapters' (the client's extras langgraph, openai-agents, claude)
    ("langgraph_store.py", "LOOM_KEY"),
    ("openai_agents_session.py", "LOOM_KEY"),
    ("claude_memory_tool.py", "LOOM_KEY"),
]


def _run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v for k, v in os.environ.items() if k not in ("LOOM_KEY", "LOOM_ADMIN_KEY", "LOOM_URL")
    }
    path = os.pathsep.join(p for p in (str(CLIENT_SRC), base.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, f"examples/{script}"],
        env={**base, "PYTHONPATH": path, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(("script", "variable"), EXAMPLES)
def test_without_a_key_the_example_says_what_to_set(script, variable):
    out = _run(script)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert out.stderr.startswith(f"Set {variable} to")


@pytest.mark.parametrize(("script", "variable"), EXAMPLES)
def test_without_a_server_the_example_says_so(script, variable):
    url = f"http://127.0.0.1:{free_port()}"
    out = _run(script, **{variable: "lm_x", "LOOM_URL": url})
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith(f"Cannot reach Loom Memory at {url}")


# --- end to end --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(settings: Settings) -> Iterator[str]:
    """The API with its worker (compression runs, as under ./scripts/serve), no LLM."""
    with live_api(
        settings,
        worker=True,
        LOOM_LLM_PROVIDER="none",
        LOOM_QUEUE_NAME=f"loom:test:examples:{uuid.uuid4().hex[:12]}",
    ) as base:
        yield base


@pytest.fixture
def admin(server: str, settings: Settings) -> Iterator[httpx.Client]:
    assert settings.admin_key is not None
    key = settings.admin_key.get_secret_value()
    with httpx.Client(
        base_url=server, timeout=30, headers={"Authorization": f"Bearer {key}"}
    ) as client:
        yield client


def _key(admin: httpx.Client, tenant_id: str, role: str, agent_id: str | None = None) -> str:
    body = {"tenant_id": tenant_id, "role": role, "agent_id": agent_id}
    resp = admin.post("/v1/api-keys", json={k: v for k, v in body.items() if v is not None})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["secret"])


@pytest.mark.parametrize(("script", "variable"), EXAMPLES)
def test_with_a_wrong_key_the_example_says_what_to_set(server: str, script, variable):
    out = _run(script, **{variable: "lm_not_a_key", "LOOM_URL": server})
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert out.stderr.startswith(f"{server} refused {variable} (401: ")
    assert f"Set {variable} to" in out.stderr


def test_agent_loop_with_the_admin_key_asks_for_a_service_key(server: str, settings):
    out = _run("agent_loop.py", LOOM_KEY=settings.admin_key.get_secret_value(), LOOM_URL=server)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert out.stderr.startswith(f"{server} refused LOOM_KEY (400: ")
    assert "Set LOOM_KEY to a service key" in out.stderr


def test_agent_loop_runs_against_a_live_server(server: str, admin: httpx.Client):
    tenant = admin.post("/v1/tenants", json={"name": f"examples-{uuid.uuid4().hex[:8]}"})
    assert tenant.status_code == 201, tenant.text
    key = _key(admin, tenant.json()["id"], "service")

    out = _run("agent_loop.py", LOOM_URL=server, LOOM_KEY=key)

    assert out.returncode == 0, out.stderr
    turns = [line for line in out.stdout.splitlines() if line.startswith("turn ")]
    assert [line.split(":")[0] for line in turns] == [f"turn {n}" for n in range(15)]
    budget = re.compile(
        r"^turn \d+: (\d+)/1800 tokens \(usage [\d.]+\) layers=\{.*\} "
        r"pending=(True|False)$"
    )
    matches = [budget.match(line) for line in turns]
    assert all(matches), turns
    assert all(int(m[1]) <= 1800 for m in matches if m)
    assert '"name": "lookup"' in out.stdout
    done = re.search(r"^session (\S+): all 75 messages kept in swap", out.stdout, re.M)
    assert done, out.stdout

    # what it stored, read back over REST with the same key
    with httpx.Client(
        base_url=server, timeout=30, headers={"Authorization": f"Bearer {key}"}
    ) as rest:
        sessions = rest.get("/v1/sessions").json()["items"]
        assert [(s["id"], s["agent_id"], s["message_count"]) for s in sessions] == [
            (done[1], "example-agent", 75)
        ]
        first = rest.get(f"/v1/sessions/{done[1]}/messages", params={"limit": 5}).json()
        assert [m["role"] for m in first["items"]] == [
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
        ]
        assert "question 0: tell me about segmented memory" in str(first["items"][0]["content"])
        tools = rest.get(f"/v1/sessions/{done[1]}/kernel").json()["tools"]
        assert [t["name"] for t in tools] == ["lookup"]
        profile = rest.get("/v1/agents/example-agent/profile").json()
        assert profile["system_prompt"] == "You are a concise research assistant."


def test_dnd_party_runs_against_a_live_server(server: str, admin: httpx.Client, settings):
    out = _run(
        "dnd_party.py", LOOM_URL=server, LOOM_ADMIN_KEY=settings.admin_key.get_secret_value()
    )

    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    head = re.fullmatch(r"tenant dnd-\w+ \((\S+)\), adventure (lost-mine-\w+)", lines[0])
    assert head, lines[0]
    tenant_id, adventure = head[1], head[2]
    assert (
        "luna      reads its own sheet: 'Name: Luna, Race: Human, Class: Rogue'; "
        "its agent keys: ['character_sheet']" in lines
    )
    assert sum("reads its own sheet" in line for line in lines) == 5
    assert "eldrin asking for 'agent:luna:character_sheet' -> 404 entry_not_found" in lines
    party = next(line for line in lines if line.startswith("dm sees the party"))
    seen = re.fullmatch(r"dm sees the party \(version (\d+)\): \[(.*)\]", party)
    assert seen, party
    assert sorted(seen[2].split(", ")) == ["'eldrin'", "'luna'", "'pip'", "'sable'", "'thorgrim'"]
    assert "dm's own character_sheet -> 404 entry_not_found (the DM has none)" in lines

    # what it stored, read back over REST by a new key of luna's
    luna = _key(admin, tenant_id, "agent", "luna")
    with httpx.Client(
        base_url=server, timeout=30, headers={"Authorization": f"Bearer {luna}"}
    ) as rest:
        sheet = rest.get("/v1/shared-memory/agent/character_sheet").json()
        assert sheet["value"] == "Name: Luna, Race: Human, Class: Rogue"
        assert sheet["writer_agent_id"] == "luna"
        stored = rest.get("/v1/shared-memory/workflow/party", params={"scope_id": adventure}).json()
        assert stored["version"] == int(seen[1])  # the last join's write
        assert sorted(stored["value"]["members"]) == ["eldrin", "luna", "pip", "sable", "thorgrim"]
        assert stored["writer_agent_id"] in seen[2]  # the last player to join


# --- the framework adapters' examples ----------------------------------------------------


def _service_key(admin: httpx.Client) -> str:
    tenant = admin.post("/v1/tenants", json={"name": f"examples-{uuid.uuid4().hex[:8]}"})
    assert tenant.status_code == 201, tenant.text
    return _key(admin, tenant.json()["id"], "service")


def _rest(server: str, key: str, agent: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}", "X-Agent-Id": agent}
    return httpx.Client(base_url=server, timeout=30, headers=headers)


def test_langgraph_store_runs_against_a_live_server(server: str, admin: httpx.Client):
    key = _service_key(admin)
    out = _run("langgraph_store.py", LOOM_URL=server, LOOM_KEY=key)

    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:5] == [
        "ann: 'I live in Lisbon and cycle to work' -> Noted.",
        "ann: 'My sister lives in Porto' -> I remember: I live in Lisbon and cycle to work (0.20)",
        "bob: 'I cycle on weekends' -> Noted.",
        "ann: 'Where does my sister live?' -> I remember: My sister lives in Porto (0.40)",
        "ann: 'Do I cycle?' -> I remember: I live in Lisbon and cycle to work (0.67)",
    ]
    assert "namespaces: [('memories', 'ann'), ('memories', 'bob')]" in lines
    assert "who cycles (turns 0-2): [('ann', 'm0'), ('bob', 'm2')]" in lines
    with _rest(server, key, "langgraph-example") as rest:
        listed = rest.get("/v1/shared-memory/global", params={"prefix": "langgraph/"}).json()
        assert [k["key"] for k in listed["items"]] == [
            f"langgraph/memories/{k}"
            for k in ("ann/=m0", "ann/=m1", "ann/=m3", "ann/=m4", "bob/=m2")
        ]
        entry = rest.get("/v1/shared-memory/global/langgraph/memories/bob/=m2").json()
        assert entry["value"] == {"text": "I cycle on weekends", "turn": 2}
        assert entry["writer_agent_id"] == "langgraph-example"


def test_openai_agents_session_runs_against_a_live_server(server: str, admin: httpx.Client):
    key = _service_key(admin)
    out = _run("openai_agents_session.py", LOOM_URL=server, LOOM_KEY=key)

    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        "user: Where is order A-17? -> agent: Good news: order A-17 left the warehouse today.",
        "user: Thanks! Anything else? -> agent: I was given 5 items.",  # the history from Loom
        "user: Bye -> agent: I was given 7 items.",
    ]
    done = re.fullmatch(r"loom session (\S+): 8 items: (.*)", lines[3])
    assert done, lines[3]
    assert done[2] == str(
        ["user", "function_call", "function_call_output", "message"] + ["user", "message"] * 2
    )
    assert lines[4] == (
        "long run: 24 items in Loom; last answer: "
        "I was given 8 items including Loom's summary of older turns."
    )
    with _rest(server, key, "agents-sdk-example") as rest:
        messages = rest.get(f"/v1/sessions/{done[1]}/messages").json()["items"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool"] + [
            "assistant",
            "user",
        ] * 2 + ["assistant"]
        assert messages[1]["tool_calls"] == [
            {"id": "call_1", "name": "order_status", "input": {"order_id": "A-17"}}
        ]
        assert messages[2]["content"] == "order A-17 left the warehouse today"
        session = rest.get(f"/v1/sessions/{done[1]}").json()
        assert (session["agent_id"], session["user_id"]) == ("agents-sdk-example", "customer-42")
        assert len(rest.get("/v1/sessions").json()["items"]) == 2  # this one and the long run


def test_claude_memory_tool_runs_against_a_live_server(server: str, admin: httpx.Client):
    key = _service_key(admin)
    out = _run("claude_memory_tool.py", LOOM_URL=server, LOOM_KEY=key)

    assert out.returncode == 0, out.stderr
    assert "File created successfully at: /memories/customer/preferences.md" in out.stdout
    assert "Successfully renamed /memories/progress.md to /memories/tickets/1182.md" in out.stdout
    assert "ERROR Path /memories/../../etc/passwd would escape /memories directory" in out.stdout
    assert out.stdout.endswith(
        "63B\t/memories\n63B\t/memories/customer/\n63B\t/memories/customer/preferences.md\n"
        "another agent reads ann's memory: \"Here's the content of /memories/diet.md with line "
        'numbers:\\n     1\\tvegetarian\\n     2\\t"\n'
        "stored in shared memory `agent` of claude-example: "
        "['claude-memory/customer/preferences.md']\n"
    )
    with _rest(server, key, "claude-example") as rest:
        prefs = rest.get("/v1/shared-memory/agent/claude-memory/customer/preferences.md")
        assert prefs.text == "- prefers phone calls\n- metric units\n- timezone: Europe/Lisbon\n"
        diet = rest.get("/v1/shared-memory/global/claude-memory/users/ann/diet.md")
        assert diet.text == "vegetarian\n"

"""The sync client end to end against a live server: a session's life cycle, shared
memory with compare-and-set and the watch stream, knowledge, tools, admin and errors."""

import uuid
from collections.abc import Iterator

import pytest
from loom_client import (
    Conflict,
    Forbidden,
    LoomClient,
    NotFound,
    PreconditionFailed,
    Unauthorized,
    ValidationError,
)
from loom_client.models import (
    AnthropicTool,
    DeleteEvent,
    HeartbeatEvent,
    OpenAITool,
    PutEvent,
    ReadyEvent,
    SharedMemoryBlob,
    SharedMemoryEntry,
    WatchEvent,
)

from tests.client.conftest import TenantKeys

# long enough that a summary of the older turns is shorter than they are (a heuristic
# summary that is not shorter is never written: tests/jobs/test_compression_not_longer.py)
TURNS = [
    f"turn {i}: the lighthouse keeper logs the storm; "
    + "the wind backs west and the lamp holds through the night, " * 4
    for i in range(1, 8)
]


def test_session_life_cycle(loom: LoomClient) -> None:
    session = loom.create_session(
        config={"l1_max_messages": 3, "max_context_tokens": 20000}, metadata={"ticket": "T-1"}
    )
    assert session.agent_id == "agent-1" and session.metadata == {"ticket": "T-1"}
    sid = session.id

    first = [{"role": "user", "content": TURNS[0]}, {"role": "assistant", "content": TURNS[1]}]
    appended = loom.append_messages(sid, first, idempotency_key="turn-1")
    assert (appended.last_seq, appended.replayed) == (2, False)
    replay = loom.append_messages(sid, first, idempotency_key="turn-1")
    assert (replay.last_seq, replay.replayed) == (2, True)
    with pytest.raises(Conflict) as caught:
        loom.append_messages(sid, first[:1], idempotency_key="turn-1")
    assert caught.value.status == 409
    loom.append_messages(
        sid,
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": t}
            for i, t in enumerate(TURNS[2:])
        ],
    )

    # the iterator follows the cursors across pages (3 pages of 3, 3, 1)
    page = loom.list_messages(sid, limit=3)
    assert [m.seq for m in page.items] == [1, 2, 3] and page.next_cursor
    assert [m.seq for m in loom.iter_messages(sid, page_size=3)] == list(range(1, 8))
    assert [m.seq for m in loom.iter_messages(sid, after_seq=5, page_size=1)] == [6, 7]
    assert [m.content for m in loom.iter_messages(sid)][:2] == TURNS[:2]

    anthropic_ctx = loom.context(sid, format="anthropic")
    assert set(anthropic_ctx) == {"system", "messages", "tools"}
    assert anthropic_ctx.response.total_tokens > 0 and anthropic_ctx.format == "anthropic"
    openai_ctx = loom.context(sid, format="openai")
    assert set(openai_ctx) == {"messages"}  # no tools: the key is left out
    raw = loom.build_context(sid, format="raw")
    assert raw.layers is not None and "l1" in raw.layers

    found = loom.search_session(sid, "lighthouse storm", limit=3)
    assert found.results and found.results[0].message.session_id == sid
    assert loom.search("lighthouse keeper", scope="agent").candidates >= 1

    compressed = loom.compress(sid, wait=True)
    assert not compressed.enqueued and compressed.summaries_written >= 1
    assert compressed.memory is not None and compressed.memory.l1_start_seq > 1
    promoted = loom.promote(sid, seqs=[1, 2])
    assert promoted.promoted_seqs == [1, 2]
    assert loom.get_memory(sid).promoted_seqs == [1, 2]
    assert loom.clear_promoted(sid).cleared == 2
    assert loom.compress(sid).enqueued is True  # queued for a worker
    assert [s.id for s in loom.iter_snapshots(sid)] == [
        s.id for s in loom.list_snapshots(sid).items
    ]

    kernel = loom.put_kernel_tools(
        sid,
        [{"name": "lookup", "description": "Find a record", "input_schema": {"type": "object"}}],
    )
    assert [t["name"] for t in kernel.tools] == ["lookup"]
    assert loom.put_kernel_schema(sid, "Ledger", {"type": "object"}).schema_ == {"type": "object"}
    assert loom.get_kernel_schema(sid, "Ledger").name == "Ledger"
    assert loom.get_kernel(sid).schemas[0]["name"] == "Ledger"
    openai_ctx = loom.context(sid, format="openai")
    assert set(openai_ctx) == {"messages", "tools"}
    assert openai_ctx["tools"][0] == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find a record",
            "parameters": {"type": "object"},
        },
    }

    updated = loom.update_session(sid, metadata={"ticket": "T-2"})
    assert updated.metadata == {"ticket": "T-2"}
    assert loom.get_session(sid).message_count == 7
    other = loom.create_session()
    assert {s.id for s in loom.iter_sessions(page_size=1)} == {sid, other.id}
    loom.delete_session(sid)
    with pytest.raises(NotFound) as missing:
        loom.get_session(sid)
    assert (missing.value.status, missing.value.code) == (404, "session_not_found")


def test_shared_memory_compare_and_set(loom: LoomClient) -> None:
    created = loom.put_shared_memory(
        "global", "plan/current", {"step": 1}, metadata={"by": "planner"}
    )
    v1 = created.version
    assert created.created is True and created.etag == f'"{v1}"'
    replaced = loom.put_shared_memory("global", "plan/current", {"step": 2}, if_match=v1)
    assert replaced.created is False and replaced.version > v1
    with pytest.raises(Conflict) as stale:
        loom.put_shared_memory("global", "plan/current", {"step": 3}, if_match=v1)
    assert (stale.value.status, stale.value.code) == (409, "version_conflict")
    with pytest.raises(PreconditionFailed):
        loom.put_shared_memory("global", "plan/current", {"step": 3}, if_none_match="*")
    with pytest.raises(PreconditionFailed):
        loom.put_shared_memory("global", "plan/missing", 0, if_match=1)

    entry = loom.get_shared_memory("global", "plan/current")
    assert isinstance(entry, SharedMemoryEntry)
    assert (entry.value, entry.version, entry.metadata) == ({"step": 2}, replaced.version, {})
    assert loom.get_shared_memory_if_changed("global", "plan/current", entry.etag) is None
    assert loom.get_shared_memory_if_changed("global", "plan/current", v1) is not None

    raw = loom.put_shared_memory_bytes(
        "workflow", "blob.bin", b"\x00\x01binary", scope_id="wf-1", metadata={"kind": "bytes"}
    )
    blob = loom.get_shared_memory("workflow", "blob.bin", scope_id="wf-1")
    assert isinstance(blob, SharedMemoryBlob)
    assert (blob.content, blob.content_type, blob.version, blob.etag) == (
        b"\x00\x01binary",
        "application/octet-stream",
        raw.version,
        raw.etag,
    )
    ref = loom.get_shared_memory_ref("workflow", "blob.bin", scope_id="wf-1")
    assert ref.id == raw.ref_id and ref.size_bytes == 8
    assert loom.get_ref(raw.ref_id).content == b"\x00\x01binary"
    assert loom.get_ref_meta(raw.ref_id).checksum == raw.checksum

    for i in range(5):
        loom.put_shared_memory("agent", f"notes/{i}", i)
    assert [k.key for k in loom.iter_shared_memory_keys("agent", prefix="notes/", page_size=2)] == [
        f"notes/{i}" for i in range(5)
    ]
    stats = {s.namespace: s for s in loom.shared_memory_stats().namespaces}
    assert stats["agent"].keys == 5 and stats["global"].keys == 1

    with pytest.raises(Conflict):
        loom.delete_shared_memory("global", "plan/current", if_match=v1)
    loom.delete_shared_memory("global", "plan/current", if_match=entry.etag)
    with pytest.raises(NotFound) as gone:
        loom.get_shared_memory("global", "plan/current")
    assert gone.value.code == "entry_not_found"


def entry_events(events: Iterator[WatchEvent], n: int) -> list[WatchEvent]:
    """The next `n` events that are not heartbeats."""
    out: list[WatchEvent] = []
    for event in events:
        if not isinstance(event, HeartbeatEvent):
            out.append(event)
            if len(out) == n:
                break
    return out


def test_watch_yields_typed_events(loom: LoomClient) -> None:
    loom.put_shared_memory("swarm", "tasks/seed", "x", scope_id="s-1")
    with loom.watch_shared_memory(
        "swarm", scope_id="s-1", prefix="tasks/", include_initial=True, heartbeat_seconds=0.5
    ) as events:
        ready = next(events)
        assert isinstance(ready, ReadyEvent)
        initial = next(events)
        assert isinstance(initial, PutEvent) and initial.initial and initial.key == "tasks/seed"
        written = loom.put_shared_memory("swarm", "tasks/1", {"todo": "map"}, scope_id="s-1")
        loom.put_shared_memory("swarm", "elsewhere", 1, scope_id="s-1")  # not under prefix
        loom.delete_shared_memory("swarm", "tasks/seed", scope_id="s-1")
        put, delete = entry_events(events, 2)
    assert isinstance(put, PutEvent) and not put.initial
    assert isinstance(delete, DeleteEvent)
    assert (put.key, put.version, put.etag, put.value, put.writer_agent_id) == (
        "tasks/1",
        written.version,
        written.etag,
        {"todo": "map"},
        "agent-1",
    )
    assert (delete.event, delete.key) == ("delete", "tasks/seed")


def test_watch_errors_raise_on_enter(loom: LoomClient) -> None:
    with pytest.raises(Exception) as caught, loom.watch_shared_memory("workflow"):
        pass  # workflow needs a scope_id
    assert getattr(caught.value, "code", None) == "invalid_scope"


def test_knowledge(loom: LoomClient) -> None:
    task = f"task/{uuid.uuid4().hex[:8]}"
    item = loom.create_memory_item(
        task, "decision", text="Use PostgreSQL for the ledger", tags=["db"], importance=0.9
    )
    assert loom.get_memory_item(item.id).text == "Use PostgreSQL for the ledger"
    for i in range(4):
        loom.create_memory_item(task, "note", payload={"n": i})
    notes = list(
        loom.iter_memory_items(
            filters={"scope": task, "kind": "note"}, order_by="-created_at", page_size=3
        )
    )  # oldest first
    assert [n.payload for n in notes] == [{"n": i} for i in range(4)]
    package = loom.create_context_package(2000, task_id=task.split("/")[1])
    assert item.id in {i.id for i in package.items} and package.text
    promoted = loom.promote_memory_item(item.id, project_id="ledger")
    assert promoted.scope == "project/ledger"
    done = loom.complete_task(task.split("/")[1], promote=[notes[0].id], project_id="ledger")
    assert done.promoted == [notes[0].id] and done.cleared == 3
    assert loom.clear_memory_items("project/ledger", filters={"kind": "note"}).removed == 1
    loom.delete_memory_item(item.id)
    with pytest.raises(NotFound):
        loom.get_memory_item(item.id)

    first = loom.put_learned("agent-1", tuned_prompts={"plan": "v1"})
    second = loom.put_learned("agent-1", tuned_prompts={"plan": "v2"})
    assert (first.version, second.version, second.active_version) == (1, 2, 2)
    assert loom.rollback_learned("agent-1").active_version == 1
    assert loom.get_learned("agent-1", version=2).tuned_prompts == {"plan": "v2"}
    profile = loom.put_profile("agent-1", "You plan migrations.", patterns=["be brief"])
    assert loom.get_profile("agent-1").version == profile.version
    # new sessions of the agent start with its profile as their ROM
    assert loom.get_memory(loom.create_session().id).rom_profile_version == profile.version


def test_tools_in_both_shapes(loom: LoomClient) -> None:
    sid = loom.create_session().id
    loom.append_messages(sid, [{"role": "user", "content": t} for t in TURNS[:3]])
    anthropic_tools = loom.list_tools(sid)
    openai_tools = loom.list_tools(sid, format="openai")
    names = [t.name for t in anthropic_tools.tools if isinstance(t, AnthropicTool)]
    assert len(names) == len(anthropic_tools.tools)
    assert [t.function.name for t in openai_tools.tools if isinstance(t, OpenAITool)] == names
    assert openai_tools.params()[0]["type"] == "function"

    result = loom.call_tool(sid, "recall_conversation", {"offset": 0, "limit": 2})
    assert not result.is_error and '"seq":1' in result.content.replace(" ", "")
    block = {
        "type": "tool_use",
        "id": "toolu_9",
        "name": "recall_conversation",
        "input": {"limit": 1},
    }
    anthropic_result = loom.execute_tool_call(sid, block)
    assert (
        anthropic_result["type"] == "tool_result"
        and anthropic_result["tool_use_id"] == ("toolu_9")
        and anthropic_result["is_error"] is False
    )
    call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "recall_conversation", "arguments": '{"limit": 1}'},
    }
    assert loom.execute_tool_call(sid, call)["role"] == "tool"
    broken = {**call, "function": {"name": "recall_conversation", "arguments": "{nope"}}
    assert "INVALID_PARAMETER" in loom.execute_tool_call(sid, broken)["content"]
    results = loom.execute_tool_calls(sid, [{"type": "text", "text": "hm"}, block])
    assert [r["tool_use_id"] for r in results] == ["toolu_9"]


def test_errors_and_auth(loom: LoomClient, loom_tenant: TenantKeys) -> None:
    with pytest.raises(NotFound) as caught:
        loom.get_session(str(uuid.uuid4()))
    assert (caught.value.status, caught.value.code) == (404, "session_not_found")
    sid = loom.create_session().id
    with pytest.raises(ValidationError) as invalid:
        loom.list_messages(sid, limit=1000)
    assert invalid.value.details[0]["loc"] == ["query", "limit"]
    with LoomClient(loom_tenant.base_url, "lm_not_a_key") as stranger, pytest.raises(Unauthorized):
        stranger.list_sessions()

    # a service key mints an agent key; the agent sees only its own sessions
    minted = loom.create_api_key("agent", agent_id="agent-2")
    with LoomClient(loom_tenant.base_url, minted.secret) as agent:
        with pytest.raises((Forbidden, NotFound)):
            agent.get_session(sid)
        assert agent.create_session().agent_id == "agent-2"
    # per-call and copied agents
    assert loom.create_session(options={"agent_id": "agent-3"}).agent_id == "agent-3"
    as_four = loom.with_agent("agent-4")
    assert as_four.create_session().agent_id == "agent-4"
    assert loom.create_session().agent_id == "agent-1"


def test_admin_and_health(loom_admin: LoomClient, loom_tenant: TenantKeys) -> None:
    assert loom_admin.healthz() == {"status": "ok", "version": "0.1.0"}
    assert loom_admin.readyz().checks == {"database": "ok", "redis": "ok"}
    assert "loom" in loom_admin.metrics() or "# HELP" in loom_admin.metrics()
    admin = loom_admin.with_tenant(loom_tenant.tenant_id)
    extra = [admin.create_api_key("agent", agent_id=f"a{i}", name=f"k{i}") for i in range(3)]
    keys = list(admin.iter_api_keys(page_size=2))
    assert {k.id for k in extra} <= {k.id for k in keys} and len(keys) == 4
    admin.revoke_api_key(extra[0].id)
    with LoomClient(loom_tenant.base_url, extra[0].secret) as revoked, pytest.raises(Unauthorized):
        revoked.list_sessions()

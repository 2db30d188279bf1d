"""The async client end to end: against the live server (sessions, shared memory, the
watch stream, knowledge, errors), and in-process through httpx's ASGI transport."""

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from loom_client import AsyncLoomClient, Conflict, NotFound
from loom_client.models import HeartbeatEvent, PutEvent, ReadyEvent, SharedMemoryEntry


async def test_session_life_cycle(aloom: AsyncLoomClient) -> None:
    session = await aloom.create_session(config={"l1_max_messages": 2})
    sid = session.id
    # long enough that a summary of the older turns is shorter than they are
    survey = "sounding the depth at the north pier, " * 8
    turns = [
        {"role": "user", "content": f"step {i} of the harbour survey: {survey}"} for i in range(5)
    ]
    first = await aloom.append_messages(sid, turns, idempotency_key="batch-1")
    again = await aloom.append_messages(sid, turns, idempotency_key="batch-1")
    assert (first.last_seq, first.replayed, again.last_seq, again.replayed) == (5, False, 5, True)
    assert [m.seq async for m in aloom.iter_messages(sid, page_size=2)] == [1, 2, 3, 4, 5]

    ctx = await aloom.context(sid)
    assert set(ctx) == {"system", "messages", "tools"}
    openai_ctx = await aloom.context(sid, format="openai")
    assert set(openai_ctx) == {"messages"}
    assert openai_ctx["messages"][-1]["content"] == turns[-1]["content"]

    found = await aloom.search_session(sid, "harbour survey", limit=2)
    assert len(found.results) == 2
    compressed = await aloom.compress(sid, wait=True)
    assert compressed.memory is not None and compressed.memory.l2
    jobs = [j async for j in aloom.iter_jobs(kind="compression", page_size=1)]
    assert [(j.session_id, j.status) for j in jobs if j.session_id == sid] == [(sid, "succeeded")]
    assert (await aloom.list_jobs()).queue is not None
    assert (await aloom.me()).role == "service"
    assert (await aloom.promote(sid, start_seq=1, end_seq=2)).promoted_seqs == [1, 2]

    # concurrent calls share the client's connection pool
    others = await asyncio.gather(*(aloom.create_session() for _ in range(3)))
    assert len({s.id for s in others}) == 3
    listed = [s.id async for s in aloom.iter_sessions(page_size=2)]
    assert set(listed) == {sid, *(s.id for s in others)}

    await aloom.delete_session(sid)
    with pytest.raises(NotFound) as caught:
        await aloom.get_memory(sid)
    assert caught.value.code == "session_not_found" and caught.value.status == 404


async def test_shared_memory_conflict_and_watch(aloom: AsyncLoomClient) -> None:
    entry = await aloom.put_shared_memory("debate", "round", 1, scope_id="d-1")
    async with aloom.watch_shared_memory("debate", scope_id="d-1", heartbeat_seconds=0.5) as events:
        assert isinstance(await events.__anext__(), ReadyEvent)
        updated = await aloom.put_shared_memory(
            "debate", "round", 2, scope_id="d-1", if_match=entry.etag
        )
        with pytest.raises(Conflict) as stale:
            await aloom.put_shared_memory(
                "debate", "round", 3, scope_id="d-1", if_match=entry.version
            )
        assert stale.value.code == "version_conflict"
        async for event in events:
            if not isinstance(event, HeartbeatEvent):
                break
    assert isinstance(event, PutEvent)
    assert (event.key, event.version, event.value) == ("round", updated.version, 2)
    current = await aloom.get_shared_memory("debate", "round", scope_id="d-1")
    assert isinstance(current, SharedMemoryEntry) and current.value == 2


async def test_knowledge_items(aloom: AsyncLoomClient) -> None:
    scope = f"project/{uuid.uuid4().hex[:8]}"
    made = [
        await aloom.create_memory_item(scope, "fact", text=f"fact {i}", importance=i / 10)
        for i in range(3)
    ]
    items = [
        i
        async for i in aloom.iter_memory_items(
            filters={"scope": scope}, order_by="importance", page_size=2
        )
    ]
    assert [i.id for i in items] == [m.id for m in reversed(made)]
    result = await aloom.query_memory_items(filters={"importance": {"$gte": 0.1}, "scope": scope})
    assert {i.text for i in result.items} == {"fact 1", "fact 2"}
    assert (await aloom.clear_memory_items(scope)).removed == 3


async def test_in_process_through_asgi_transport(app: Any, tenant: Any) -> None:
    """`transport=` takes any httpx transport: here the app itself, no server."""
    async with AsyncLoomClient(
        "http://loom.test",
        tenant.service_key,
        agent_id="planner",
        transport=httpx.ASGITransport(app=app),
    ) as loom:
        session = await loom.create_session()
        assert session.agent_id == "planner"
        await loom.append_messages(session.id, [{"role": "user", "content": "hello"}])
        assert (await loom.context(session.id))["messages"][0]["role"] == "user"
        tools = await loom.list_tools(session.id, format="openai")
        assert tools.params()[0]["type"] == "function"
        with pytest.raises(NotFound):
            await loom.get_session(str(uuid.uuid4()))

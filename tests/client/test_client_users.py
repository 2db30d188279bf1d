"""The client learns users (issue 28): sessions with a user, the users list, search over a
user's sessions, export -> import, and erasure with its receipt (sync and async)."""

import uuid

from loom_client import AsyncLoomClient, LoomClient, NotFound


def test_users_sync(loom: LoomClient) -> None:
    user = f"cu-{uuid.uuid4().hex[:8]}"
    s = loom.create_session(user_id=user)
    assert s.user_id == user
    loom.append_messages(s.id, [{"role": "user", "content": "my order 55 is late"}])
    assert [x.id for x in loom.list_sessions(user_id=user).items] == [s.id]
    assert user in {u.id for u in loom.iter_users()}
    assert loom.get_user(user).session_count == 1
    hits = loom.search("order 55", scope="user", user_id=user, rerank=False)
    assert hits.results and hits.results[0].session_id == s.id
    data = loom.export_user(user)
    assert data.startswith(b"{") and data.rstrip().endswith(b"}")
    again = loom.import_export(data)
    assert sum(again.inserted.values()) == 0 and again.already_present["message"] == 1
    receipt = loom.erase_user(user)
    assert receipt.status == "completed" and receipt.counts["messages"] == 1
    assert loom.get_erasure(receipt.erasure_id).counts == receipt.counts
    assert [e.erasure_id for e in loom.find_erasures(user_id=user).items] == [receipt.erasure_id]
    try:
        loom.get_user(user)
        raise AssertionError("erased user still there")
    except NotFound:
        pass


async def test_agent_memory_async(aloom: AsyncLoomClient) -> None:
    await aloom.put_shared_memory("agent", "notes", {"x": 1})
    receipt = await aloom.erase_agent_memory("agent-1")
    assert receipt.kind == "agent" and receipt.counts["shared_memory_entries"] == 1
    page = await aloom.list_users()
    assert page.items == []

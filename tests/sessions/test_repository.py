"""The session SQL (`app.sessions.repository`) on the connection under a SQLAlchemy
session: `SessionRow` rows, the tombstone, the list's filters and cursor, the update's
fresh counters, and the transaction it runs in."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx

from app.models.session import SessionRow
from app.sessions import repository
from tests.support.api import create_session
from tests.support.sa_conn import driver_connection


async def test_rows_and_the_tombstone(client: httpx.AsyncClient, tenant: Any, db: Any) -> None:
    tid = uuid.UUID(tenant.id)
    one = await create_session(client, metadata={"k": 1})
    two = await create_session(client, "agent-2")
    r = await client.post(
        f"/v1/sessions/{one['id']}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert r.status_code == 201, r.text
    conn = await driver_connection(db)
    row = await repository.get(conn, tid, uuid.UUID(one["id"]))
    assert isinstance(row, SessionRow)
    assert (row.agent_id, row.meta, row.status, row.ended_at) == (
        "agent-1",
        {"k": 1},
        "active",
        None,
    )
    assert row.last_seq == 1 and row.message_tokens > 0  # the append's counters, read fresh
    assert await repository.get(conn, uuid.uuid4(), row.id) is None  # another tenant's
    assert await repository.get(conn, tid, row.id, lock=True) == row

    every = await repository.list_page(conn, tid, agent_id=None, after=None, limit=10)
    assert [s.id for s in every] == [row.id, uuid.UUID(two["id"])]
    assert [
        s.id
        for s in await repository.list_page(conn, tid, agent_id="agent-2", after=None, limit=10)
    ] == [uuid.UUID(two["id"])]
    after = (row.created_at, row.id)
    assert [
        s.id for s in await repository.list_page(conn, tid, agent_id=None, after=after, limit=10)
    ] == [uuid.UUID(two["id"])]
    assert await repository.list_page(conn, tid, agent_id=None, after=None, limit=1) == [row]
    assert (
        await repository.list_page(conn, tid, agent_id=None, after=None, limit=9, user_id="u") == []
    )

    # a session under erasure reads as deleted everywhere, and is not changed
    await conn.execute(
        "UPDATE sessions SET erasure_id = $3 WHERE tenant_id = $1 AND id = $2",
        tid,
        row.id,
        uuid.uuid4(),
    )
    assert await repository.get(conn, tid, row.id) is None
    assert [
        s.id for s in await repository.list_page(conn, tid, agent_id=None, after=None, limit=10)
    ] == [uuid.UUID(two["id"])]
    now = datetime.now(UTC)
    gone = await repository.update(
        conn, tid, row.id, config={}, meta={}, status="ended", ended_at=now, updated_at=now
    )
    assert gone is None
    await db.rollback()


async def test_insert_and_update_in_the_session_transaction(tenant: Any, db: Any) -> None:
    """The first statement of a SQLAlchemy session on its connection runs in the session's
    transaction (`driver_connection` begins it): a rollback takes the insert back."""
    tid = uuid.UUID(tenant.id)
    conn = await driver_connection(db)
    assert conn.is_in_transaction()
    now = datetime.now(UTC)
    row = await repository.insert(
        conn,
        tenant_id=tid,
        session_id=uuid.uuid4(),
        agent_id="agent-x",
        user_id="u-1",
        config={"big": 2**70},
        meta={"m": "é"},
        now=now,
    )
    assert row == SessionRow(
        row.id, tid, "agent-x", "u-1", {"big": 2**70}, {"m": "é"}, "active", None, 0, 0, now, now
    )
    later = datetime.now(UTC)
    ended = await repository.update(
        conn,
        tid,
        row.id,
        config={},
        meta={"n": 2},
        status="ended",
        ended_at=later,
        updated_at=later,
    )
    assert ended == row._replace(
        config={}, meta={"n": 2}, status="ended", ended_at=later, updated_at=later
    )
    await db.rollback()
    conn = await driver_connection(db)
    assert await repository.get(conn, tid, row.id) is None
    await db.rollback()


async def test_a_change_answers_the_stored_row(client: httpx.AsyncClient, tenant: Any) -> None:
    """PATCH answers the row as its UPDATE stored it: the counters of the appends before it,
    the merged config; an invalid config changes nothing; another agent's is 404."""
    made = await create_session(client, l1_max_messages=6)
    sid = made["id"]
    msgs = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    patched = await client.patch(f"/v1/sessions/{sid}", json={"config": {"max_l2_tokens": 300}})
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["message_count"] == 2 and body["message_tokens"] > 0
    assert body["config"]["l1_max_messages"] == 6 and body["config"]["max_l2_tokens"] == 300
    assert body["updated_at"] > made["updated_at"] and body["created_at"] == made["created_at"]
    bad = await client.patch(f"/v1/sessions/{sid}", json={"config": {"l1_max_messages": -1}})
    assert bad.status_code == 422, bad.text
    got = (await client.get(f"/v1/sessions/{sid}")).json()
    assert {**got, "memory": None} == {**body, "memory": None}
    other = await tenant.new_client(role="agent", agent_id="someone-else")
    r = await other.patch(f"/v1/sessions/{sid}", json={"metadata": {}})
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"


async def test_an_autocommit_session_begins_nothing(_test_engine: Any) -> None:
    """A `read_only` route's session (autocommit) gets its connection as it is."""
    from sqlalchemy.ext.asyncio import AsyncSession

    engine = _test_engine.execution_options(isolation_level="AUTOCOMMIT")
    async with AsyncSession(engine) as db:
        conn = await driver_connection(db)
        assert not conn.is_in_transaction()

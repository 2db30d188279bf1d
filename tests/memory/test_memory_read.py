"""The one read of a session's memory (`app.memory.repository.read`): its rows are the table
models' (select lists derived from them), and every window reads what the layers hold."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlmodel import col

from app.jobs import repository as jobs_repository
from app.memory import repository
from app.memory import service as memory_service
from app.memory.aggregate import load
from app.models import Message, Session
from app.models.base import row_columns
from app.models.memory import MemorySnapshot, MemoryState, MemorySummary
from app.models.memory_snapshot import SnapshotRow
from app.models.memory_state import StateRow
from app.models.memory_summary import SummaryRow
from app.models.message import MESSAGE_ROW_COLUMNS, StoredMessage
from app.models.session import SessionRow
from app.sessions.access import SessionNotFound
from tests.support.api import create_session
from tests.support.sa_conn import driver_connection


def _columns(model: Any) -> set[str]:
    return set(sa.inspect(model).columns.keys())


def test_rows_are_the_models_columns() -> None:
    for row, model in (
        (SessionRow, Session),
        (StateRow, MemoryState),
        (SummaryRow, MemorySummary),
        (StoredMessage, Message),
        (SnapshotRow, MemorySnapshot),
    ):
        assert set(row._fields) <= _columns(model), row.__name__
    # a writer reads the whole state: a new column of the table is a new field of the row
    assert set(StateRow._fields) == _columns(MemoryState)
    assert MESSAGE_ROW_COLUMNS[StoredMessage._fields.index("meta")] == "metadata"
    with pytest.raises(TypeError):
        row_columns(("no_such_column",), Message)


async def test_windows_read_the_layers(client: httpx.AsyncClient, db: Any) -> None:
    sid = (await create_session(client, l1_max_messages=2))["id"]
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(30)]
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    row = (
        await db.execute(sa.select(Session).where(col(Session.id) == uuid.UUID(sid)))
    ).scalar_one()
    conn = await driver_connection(db)
    every = await repository.read(conn, row.tenant_id, row.id)
    assert every is not None and every.state is not None
    assert [m.seq for m in every.l1] == list(range(1, 31))
    assert every.session == SessionRow(*(getattr(row, f) for f in SessionRow._fields))
    first = await repository.read(conn, row.tenant_id, row.id, repository.oldest(5))
    assert first is not None and [m.seq for m in first.l1] == [1, 2, 3, 4, 5]
    window = await load(conn, row.tenant_id, row.id, window=repository.CONTEXT)
    # 4 * l1_max_messages + 16 newest, the older backlog one pointer
    assert [m.seq for m in window.l1] == list(range(7, 31))
    assert window.gap is not None and (window.gap.start_seq, window.gap.end_seq) == (1, 6)
    assert await repository.read(conn, row.tenant_id, uuid.uuid4()) is None
    with pytest.raises(SessionNotFound):
        await load(conn, row.tenant_id, uuid.uuid4())
    await db.rollback()


async def _agree(client: httpx.AsyncClient, db: Any, sid: str) -> dict[str, Any]:
    """The stored counters (the append's and the jobs' one SQL definition) and the rows
    `GET .../memory` sums give the same tokens and usage."""
    memory = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    listed = (await client.get(f"/v1/sessions/{sid}")).json()["memory"]
    assert listed == memory["tokens"]
    row = (
        await db.execute(sa.select(Session).where(col(Session.id) == uuid.UUID(sid)))
    ).scalar_one()
    pressure = await jobs_repository.pressure(await driver_connection(db), row.tenant_id, row.id)
    assert pressure is not None
    assert int(pressure["fixed_tokens"]) + int(pressure["l1_tokens"]) == memory["tokens"]["total"]
    assert int(pressure["l1_tokens"]) == memory["tokens"]["l1"]
    assert (
        round(await memory_service.memory_usage(await driver_connection(db), row), 6)
        == memory["usage"]
    )
    await db.rollback()
    return dict(memory["tokens"])


async def test_counters_agree_with_the_rows(client: httpx.AsyncClient, db: Any) -> None:
    sid = (
        await create_session(
            client,
            max_context_tokens=2000,
            reserved_output_tokens=200,
            l1_max_messages=6,
            max_l2_tokens=300,
        )
    )["id"]
    seen = []
    for n in range(8):
        msgs = [
            {"role": "user", "content": f"question {n} " + "word " * (20 + 7 * n)},
            {"role": "assistant", "content": f"answer {n} " + "more " * (15 + 5 * n)},
        ]
        r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
        assert r.status_code == 201, r.text
        seen.append(await _agree(client, db, sid))
        if n % 3 == 2:
            done = await client.post(f"/v1/sessions/{sid}/memory/compress?wait=true")
            assert done.status_code == 200, done.text
            seen.append(await _agree(client, db, sid))
    promoted = await client.post(f"/v1/sessions/{sid}/memory/promote", json={"seqs": [1]})
    assert promoted.status_code == 200, promoted.text
    assert (await _agree(client, db, sid))["promoted"] > 0
    assert any(t["l2"] for t in seen)  # compression moved tokens out of L1


async def test_promotion_reads_and_a_new_state(client: httpx.AsyncClient, db: Any) -> None:
    """The single-message reads of promotion (by seq, by tool call), and the insert of a
    new session's state, on the connection under a SQLAlchemy session."""
    sid = (await create_session(client))["id"]
    calls = [{"id": "c1", "name": "run_sql", "input": {}}, {"id": "c2", "name": "x", "input": {}}]
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "checking", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "assistant", "content": "a"},
    ]
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    row = (
        await db.execute(sa.select(Session).where(col(Session.id) == uuid.UUID(sid)))
    ).scalar_one()
    conn = await driver_connection(db)
    t, s = row.tenant_id, row.id
    got = await repository.messages_by_seqs(conn, t, s, [5, 1, 99])
    assert [(m.seq, m.role) for m in got] == [(1, "user"), (5, "assistant")]
    assert await repository.messages_by_seqs(conn, t, s, []) == []
    assert [m.seq for m in await repository.tool_partners(conn, t, s, ["c2"])] == [2, 4]
    assert [m.seq for m in await repository.tool_partners(conn, t, s, ["c1", "nope"])] == [2, 3]
    assert await repository.tool_partners(conn, t, s, ["nope"]) == []
    await conn.execute("DELETE FROM memory_states WHERE tenant_id = $1 AND session_id = $2", t, s)
    kernel: dict[str, Any] = {"tools": [], "schemas": [], "large_result_ref": None}
    rom = {"profile_version": None, "system_prompt": "be brief", "big": 2**70}
    await repository.insert_state(
        conn,
        tenant_id=t,
        session_id=s,
        rom=rom,
        rom_text="be brief",
        rom_tokens=3,
        kernel=kernel,
    )
    state = (await load(conn, t, s, window=repository.oldest(0))).state
    assert (state.rom, state.rom_text, state.rom_tokens, state.kernel) == (
        rom,
        "be brief",
        3,
        kernel,
    )
    assert (state.version, state.l1_start_seq, state.promoted_seqs, state.l2_tokens) == (
        0,
        1,
        [],
        0,
    )
    await db.rollback()

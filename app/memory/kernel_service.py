"""Kernel: tool definitions, the schema LRU, the latest large tool result reference.

Every change reads the state through the aggregate's locked load (`load(lock=True)`, no
L1 messages: the Kernel needs none) and stores the new Kernel in one statement
(`repository.set_kernel`), on the connection of the caller's transaction (a route's,
`app.auth.deps.DbDep`; the append's)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from app.core.errors import NotFound
from app.memory import layers, repository
from app.memory.aggregate import load, memory_config
from app.memory.errors import OverBudget
from app.memory.schemas import KernelPublic
from app.models.memory_state import StateRow
from app.models.session import SessionRow

# the Kernel reads no L1 message
_NO_L1 = repository.oldest(0)


async def _locked(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> StateRow:
    return (await load(conn, tenant_id, session_id, window=_NO_L1, lock=True)).state


async def _store(
    conn: asyncpg.Connection,
    state: StateRow,
    kernel: dict[str, Any],
    session_row: SessionRow | None,
) -> StateRow:
    tokens = layers.kernel_tokens(kernel)
    if session_row is not None:
        half = memory_config(session_row).budget // 2
        if state.rom_tokens + tokens > half:
            raise OverBudget(
                f"ROM + Kernel would be {state.rom_tokens + tokens} tokens; at "
                f"most half the budget ({half}) is allowed."
            )
    return await repository.set_kernel(conn, state.tenant_id, state.session_id, kernel, tokens)


def to_public(state: StateRow) -> KernelPublic:
    k = state.kernel or {}
    return KernelPublic(
        tools=k.get("tools") or [],
        schemas=k.get("schemas") or [],
        large_result_ref=k.get("large_result_ref"),
        tokens=state.kernel_tokens,
    )


async def put_tools(
    conn: asyncpg.Connection, session_row: SessionRow, tools: list[dict[str, Any]]
) -> StateRow:
    state = await _locked(conn, session_row.tenant_id, session_row.id)
    return await _store(conn, state, {**(state.kernel or {}), "tools": tools}, session_row)


async def put_schema(
    conn: asyncpg.Connection, session_row: SessionRow, name: str, schema: Any
) -> list[str]:
    state = await _locked(conn, session_row.tenant_id, session_row.id)
    kernel, evicted = layers.put_schema(state.kernel or {}, name, schema)
    await _store(conn, state, kernel, session_row)
    return evicted


async def read_schema(conn: asyncpg.Connection, session_row: SessionRow, name: str) -> Any:
    """A cached schema; reading makes it the most recently used."""
    state = await _locked(conn, session_row.tenant_id, session_row.id)
    hit = layers.touch_schema(state.kernel or {}, name)
    if hit is None:
        raise NotFound(f"No schema {name!r} in the Kernel cache.", code="schema_not_found")
    kernel, schema = hit
    await _store(conn, state, kernel, None)
    return schema


async def get(conn: asyncpg.Connection, session_row: SessionRow) -> StateRow:
    return (await load(conn, session_row.tenant_id, session_row.id, window=_NO_L1)).state


async def set_large_result_ref(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    seq: int,
    ref: dict[str, Any],
) -> None:
    """Point the Kernel at the latest large tool result (`seq`'s), in the transaction of
    `conn` (the append's, `app.memory.hooks`)."""
    state = await _locked(conn, tenant_id, session_id)
    await _store(
        conn, state, {**(state.kernel or {}), "large_result_ref": {**ref, "seq": seq}}, None
    )

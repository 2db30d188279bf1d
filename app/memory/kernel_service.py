"""Kernel: tool definitions, the schema LRU, the latest large tool result reference."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core import pg
from app.core.errors import NotFound
from app.memory import layers, repository
from app.memory.aggregate import memory_config
from app.memory.errors import OverBudget
from app.memory.schemas import KernelPublic
from app.models import Session
from app.models.memory import MemoryState


async def _locked(db: AsyncSession, session_row: Session) -> MemoryState:
    state = await repository.get_state(db, session_row.tenant_id, session_row.id, lock=True)
    if state is None:
        await repository.ensure_state(
            await pg.driver_connection(db), session_row.tenant_id, session_row.id
        )
        state = await repository.get_state(db, session_row.tenant_id, session_row.id, lock=True)
    assert state is not None
    return state


def _store(state: MemoryState, kernel: dict[str, Any], session_row: Session | None) -> None:
    tokens = layers.kernel_tokens(kernel)
    if session_row is not None:
        half = memory_config(session_row).budget // 2
        if state.rom_tokens + tokens > half:
            raise OverBudget(
                f"ROM + Kernel would be {state.rom_tokens + tokens} tokens; at "
                f"most half the budget ({half}) is allowed."
            )
    state.kernel = kernel
    state.kernel_tokens = tokens
    state.version = state.version + 1


def to_public(state: MemoryState) -> KernelPublic:
    k = state.kernel or {}
    return KernelPublic(
        tools=k.get("tools") or [],
        schemas=k.get("schemas") or [],
        large_result_ref=k.get("large_result_ref"),
        tokens=state.kernel_tokens,
    )


async def put_tools(
    db: AsyncSession, session_row: Session, tools: list[dict[str, Any]]
) -> MemoryState:
    state = await _locked(db, session_row)
    _store(state, {**(state.kernel or {}), "tools": tools}, session_row)
    await db.flush()
    return state


async def put_schema(db: AsyncSession, session_row: Session, name: str, schema: Any) -> list[str]:
    state = await _locked(db, session_row)
    kernel, evicted = layers.put_schema(state.kernel or {}, name, schema)
    _store(state, kernel, session_row)
    await db.flush()
    return evicted


async def read_schema(db: AsyncSession, session_row: Session, name: str) -> Any:
    """A cached schema; reading makes it the most recently used."""
    state = await _locked(db, session_row)
    hit = layers.touch_schema(state.kernel or {}, name)
    if hit is None:
        raise NotFound(f"No schema {name!r} in the Kernel cache.", code="schema_not_found")
    kernel, schema = hit
    _store(state, kernel, None)
    await db.flush()
    return schema


async def get(db: AsyncSession, session_row: Session) -> MemoryState:
    state = await repository.get_state(db, session_row.tenant_id, session_row.id)
    if state is None:
        state = await _locked(db, session_row)
    return state


async def set_large_result_ref(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, seq: int, ref: dict[str, Any]
) -> None:
    state = await repository.get_state(db, tenant_id, session_id, lock=True)
    if state is None:
        return
    _store(state, {**(state.kernel or {}), "large_result_ref": {**ref, "seq": seq}}, None)
    await db.flush()

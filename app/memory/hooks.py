"""Memory joins the session and message lifecycles through their hooks (see
`app.wiring`)."""

from __future__ import annotations

import asyncpg

from app.auth.caller import Caller
from app.core.tokens import count_text
from app.memory import repository
from app.memory.aggregate import memory_config
from app.memory.errors import RomTooLarge
from app.memory.kernel_service import set_large_result_ref
from app.memory.layers import rom_text
from app.memory.rom import Rom
from app.messages.hooks import AfterAppend, AppendedBatch, AppendTx
from app.models.session import SessionRow
from app.shared_memory.offload import holds_reference


async def freeze_rom(conn: asyncpg.Connection, session: SessionRow, rom: Rom) -> None:
    """Freeze the ROM the session's creation resolved (its inline one, else its agent
    profile's current version): at most half the budget, kept in the memory state."""

    stored = rom.stored()
    text = rom_text(stored)
    tokens = count_text(text)
    budget = memory_config(session).budget
    if tokens > budget // 2:
        raise RomTooLarge(
            f"The ROM is {tokens} tokens; at most half the budget "
            f"({budget // 2}) is allowed so the conversation fits."
        )
    await repository.insert_state(
        conn,
        tenant_id=session.tenant_id,
        session_id=session.id,
        rom=stored,
        rom_text=text,
        rom_tokens=tokens,
        kernel={"tools": [], "schemas": [], "large_result_ref": None},
    )


async def _track_large_results(tx: AppendTx, caller: Caller, batch: AppendedBatch) -> None:
    """Keep a reference to the latest large (offloaded) tool result in the Kernel."""
    refs = [
        (m.seq, m.metadata["data_ref"])
        for m in batch.messages
        if isinstance(m.metadata, dict) and isinstance(m.metadata.get("data_ref"), dict)
    ]
    if not refs:
        return

    seq, ref = refs[-1]
    await set_large_result_ref(tx.conn, batch.tenant_id, batch.session_id, seq, ref)


track_large_results = AfterAppend(holds_reference, _track_large_results)

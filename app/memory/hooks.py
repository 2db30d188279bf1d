"""Memory joins the session and message lifecycles through their hooks (see
`app.wiring`)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.caller import Caller
from app.core.tokens import count_text
from app.memory import repository
from app.memory.aggregate import memory_config
from app.memory.errors import RomTooLarge
from app.memory.kernel_service import set_large_result_ref
from app.memory.layers import rom_text
from app.messages.hooks import AfterAppend, AppendedBatch, AppendTx
from app.models import Session
from app.models.memory import MemoryState
from app.profiles import repository as profiles
from app.sessions.schemas import SessionCreate
from app.shared_memory.offload import holds_reference


async def freeze_rom(
    db: AsyncSession, caller: Caller, session: Session, body: SessionCreate
) -> None:
    """Freeze the ROM: the inline one, else the agent's current profile version."""

    inline = getattr(body, "rom", None)
    if inline is not None:
        rom = {"profile_version": None, **inline.model_dump()}
    else:
        profile = await profiles.latest(db, caller.tenant_id, session.agent_id)
        rom = {
            "profile_version": profile.version if profile else None,
            "system_prompt": profile.system_prompt if profile else "",
            "patterns": profile.patterns if profile else [],
            "backend_schema": profile.backend_schema if profile else None,
        }
        if profile is not None and profile.facts and not (session.config or {}).get("facts"):
            # the profile's facts config is the default of the agent's new sessions
            session.config = {**(session.config or {}), "facts": profile.facts}
        if (
            profile is not None
            and profile.audit is not None
            and (session.config or {}).get("audit") is None
        ):
            # so is its audit setting (issue 30: record every context build's manifest)
            session.config = {**(session.config or {}), "audit": profile.audit}
    text = rom_text(rom)
    tokens = count_text(text)
    budget = memory_config(session).budget
    if tokens > budget // 2:
        raise RomTooLarge(
            f"The ROM is {tokens} tokens; at most half the budget "
            f"({budget // 2}) is allowed so the conversation fits."
        )
    await repository.add_state(
        db,
        MemoryState(
            session_id=session.id,
            tenant_id=session.tenant_id,
            rom=rom,
            rom_text=text,
            rom_tokens=tokens,
            kernel={"tools": [], "schemas": [], "large_result_ref": None},
            promoted_seqs=[],
        ),
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

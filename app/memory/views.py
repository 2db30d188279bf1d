"""Read models of a session's memory (for GET /memory and GET /sessions/{id})."""

from sqlalchemy.ext.asyncio import AsyncSession

from app.jobs.service import compression_status
from app.memory import policy, repository
from app.memory.schemas import LayerTokens, MemoryPublic, SummaryPublic
from app.memory.state import load
from app.models import Session


async def memory_public(db: AsyncSession, session_row: Session) -> MemoryPublic:
    loaded = await load(db, session_row)
    layers = loaded.layers
    state = loaded.state
    pending = policy.plan(layers, loaded.cfg)
    compression = await compression_status(db, session_row.tenant_id, session_row.id)
    return MemoryPublic(
        version=state.version,
        rom_profile_version=(state.rom or {}).get("profile_version"),
        l1_seqs=[m.seq for m in loaded.l1], l1_start_seq=state.l1_start_seq,
        l2=[SummaryPublic(start_seq=s.start_seq, end_seq=s.end_seq, text=s.text,
                          method=s.method, token_count=s.token_count) for s in loaded.l2],
        promoted_seqs=list(state.promoted_seqs or []),
        snapshot_count=await repository.snapshot_count(db, session_row.tenant_id,
                                                       session_row.id),
        tokens=LayerTokens(rom=layers.rom_tokens, kernel=layers.kernel_tokens,
                           l2=layers.l2_tokens, promoted=layers.promoted_tokens,
                           l1=layers.l1_tokens, total=layers.memory_tokens),
        budget=loaded.cfg.budget, usage=round(policy.usage_of(layers, loaded.cfg), 6),
        compression_due=pending is not None,
        compression=compression,
        pending_triggers=list(pending.triggers) if pending else [])


async def layer_tokens(db: AsyncSession, session_row: Session) -> LayerTokens:
    """Stored tokens per layer (ROM, Kernel, L2, promoted, L1)."""
    layers = (await load(db, session_row)).layers
    return LayerTokens(rom=layers.rom_tokens, kernel=layers.kernel_tokens, l2=layers.l2_tokens,
                       promoted=layers.promoted_tokens, l1=layers.l1_tokens,
                       total=layers.memory_tokens)

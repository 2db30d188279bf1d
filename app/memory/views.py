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
    """Stored tokens per layer (ROM, Kernel, L2, promoted, L1), from the state row's
    counters and one sum over L1 (no message rows are loaded)."""
    state = await repository.get_state(db, session_row.tenant_id, session_row.id)
    if state is None:
        return LayerTokens(rom=0, kernel=0, l2=0, promoted=0, l1=0, total=0)
    l1 = await repository.l1_tokens(db, session_row.tenant_id, session_row.id,
                                    state.l1_start_seq)
    fixed = state.rom_tokens + state.kernel_tokens + state.l2_tokens + state.promoted_tokens
    return LayerTokens(rom=state.rom_tokens, kernel=state.kernel_tokens, l2=state.l2_tokens,
                       promoted=state.promoted_tokens, l1=l1, total=fixed + l1)


async def layer_tokens_of_page(db: AsyncSession, rows: list[Session]) -> list[LayerTokens]:
    """`layer_tokens` of a page of sessions in one query, L1 from the stored counters
    (`sessions.message_tokens - memory_states.swapped_tokens`, as the append keeps them)."""
    if not rows:
        return []
    states = await repository.states_of(db, rows[0].tenant_id, [r.id for r in rows])
    out = []
    for row in rows:
        st = states.get(row.id)
        if st is None:
            out.append(LayerTokens(rom=0, kernel=0, l2=0, promoted=0, l1=0, total=0))
            continue
        l1 = max(0, row.message_tokens - st.swapped_tokens)
        fixed = st.rom_tokens + st.kernel_tokens + st.l2_tokens + st.promoted_tokens
        out.append(LayerTokens(rom=st.rom_tokens, kernel=st.kernel_tokens, l2=st.l2_tokens,
                               promoted=st.promoted_tokens, l1=l1, total=fixed + l1))
    return out

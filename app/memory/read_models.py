"""Read models of a session's memory (for GET /memory and GET /sessions/{id}).

They take the route's asyncpg connection (`app.auth.deps.DbDep`); `memory_public` is given the
compression job's status, which the route reads through `app.jobs.service`."""

import asyncpg

from app.jobs.schemas import CompressionJobPublic
from app.memory import policy, repository
from app.memory.aggregate import load
from app.memory.schemas import LayerTokens, MemoryPublic, SummaryPublic
from app.models.session import SessionRow


async def memory_public(
    conn: asyncpg.Connection, session_row: SessionRow, compression: CompressionJobPublic | None
) -> MemoryPublic:
    loaded = await load(conn, session_row.tenant_id, session_row.id)
    layers = loaded.layers
    state = loaded.state
    pending = policy.plan(layers, loaded.cfg)
    return MemoryPublic(
        version=state.version,
        rom_profile_version=(state.rom or {}).get("profile_version"),
        l1_seqs=[m.seq for m in loaded.l1],
        l1_start_seq=state.l1_start_seq,
        l2=[
            SummaryPublic(
                start_seq=s.start_seq,
                end_seq=s.end_seq,
                text=s.text,
                method=s.method,
                token_count=s.token_count,
            )
            for s in loaded.l2
        ],
        promoted_seqs=list(state.promoted_seqs or []),
        snapshot_count=await repository.snapshot_count(conn, session_row.tenant_id, session_row.id),
        tokens=LayerTokens(
            rom=layers.rom_tokens,
            kernel=layers.kernel_tokens,
            l2=layers.l2_tokens,
            promoted=layers.promoted_tokens,
            l1=layers.l1_tokens,
            total=layers.memory_tokens,
        ),
        budget=loaded.cfg.budget,
        usage=round(policy.usage_of(layers, loaded.cfg), 6),
        compression_due=pending is not None,
        compression=compression,
        pending_triggers=list(pending.triggers) if pending else [],
    )


async def layer_tokens(conn: asyncpg.Connection, session_row: SessionRow) -> LayerTokens:
    """Stored tokens per layer (ROM, Kernel, L2, promoted, L1) of one session
    (`layer_tokens_of_page`)."""
    return (await layer_tokens_of_page(conn, [session_row]))[0]


async def layer_tokens_of_page(
    conn: asyncpg.Connection, rows: list[SessionRow]
) -> list[LayerTokens]:
    """Tokens per layer of a page of sessions, in one read of their stored counters
    (`app.models.memory_state.L1_TOKENS_SQL`, as the append and compression keep them; no
    message rows are read)."""
    if not rows:
        return []
    counters = await repository.layer_counters(conn, rows[0].tenant_id, [r.id for r in rows])
    out = []
    for row in rows:
        c = counters.get(row.id)
        if c is None:
            out.append(LayerTokens(rom=0, kernel=0, l2=0, promoted=0, l1=0, total=0))
            continue
        out.append(
            LayerTokens(
                rom=c.rom_tokens,
                kernel=c.kernel_tokens,
                l2=c.l2_tokens,
                promoted=c.promoted_tokens,
                l1=c.l1_tokens,
                total=c.rom_tokens
                + c.kernel_tokens
                + c.l2_tokens
                + c.promoted_tokens
                + c.l1_tokens,
            )
        )
    return out

"""POST /sessions/{id}/context: the ready-to-send context, never over the budget."""

import uuid

from fastapi import APIRouter, Response

from app.auth.deps import CallerDep
from app.context import builder, render
from app.context.schemas import CompressionState, ContextPublic, ContextRequest
from app.core.db import DbDep, read_only
from app.core.errors import ERROR_RESPONSES
from app.memory import repository as memory_repository
from app.memory.fastload import load_for_context
from app.state import StateDep

router = APIRouter(tags=["context"], responses=ERROR_RESPONSES)


@router.post("/sessions/{session_id}/context", response_model=ContextPublic)
@read_only
async def build_context(session_id: uuid.UUID, db: DbDep, caller: CallerDep, state: StateDep,
                        body: ContextRequest | None = None) -> Response:
    """Build the context in ``anthropic``, ``openai`` or ``raw`` format, with tokens per
    layer, budget, usage and the compression state."""
    fmt = body.format if body is not None else "anthropic"
    # one round trip reads the session and its memory (a session made before memory
    # existed gets its empty state first)
    fast = await load_for_context(db, caller, session_id)
    if fast is None:
        await memory_repository.ensure_state(db, caller.tenant_id, session_id)
        fast = await load_for_context(db, caller, session_id)
        assert fast is not None
    session, loaded = fast
    built = await builder.build(db, session, loaded, providers=state.hooks.context_blocks)
    view = built.view
    payload = render.RENDERERS[fmt](built)
    total = built.total_tokens
    public = ContextPublic(
        format=fmt, **payload, tokens=built.layer_tokens, total_tokens=total,
        budget=view.budget, usage=round(total / view.budget, 6),
        l1_seqs=[m.seq for m in view.l1],
        compression=CompressionState(
            pending=view.plan is not None,
            triggers=list(view.plan.triggers) if view.plan else [],
            stand_in_ranges=[[s.start_seq, s.end_seq] for s in view.stand_ins],
            dropped_summaries=len([s for s in view.dropped_l2 if not s.stand_in]),
            dropped_promoted=view.dropped_promoted, dropped_blocks=view.dropped_blocks,
            omitted_seqs=view.dropped_l1, truncated_seqs=sorted(view.truncated),
            decisions=view.decisions))
    # serialised once: the model was validated as it was built (the hot route skips
    # FastAPI's second validation against the response model)
    return Response(public.model_dump_json(), media_type="application/json")

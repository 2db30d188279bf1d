"""Swap search over one session, or over an agent's or the tenant's sessions."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Body

from app.auth.deps import CallerDep
from app.core.db import transaction
from app.core.errors import ERROR_RESPONSES, Forbidden
from app.messages.service import to_public
from app.search import examples, service
from app.search.deps import SearchEnvDep
from app.search.schemas import (
    QueryDate,
    SearchCreate,
    SearchHitPublic,
    SearchPublic,
    SessionSearchCreate,
)
from app.search.scope import SearchScope
from app.sessions import repository as sessions_repository
from app.sessions.access import require_visible_pg, visible_session
from app.state import StateDep

router = APIRouter(tags=["search"], responses=ERROR_RESPONSES)


def _public(outcome: service.SearchOutcome, promoted: list[int] | None = None) -> SearchPublic:
    return SearchPublic(
        results=[SearchHitPublic(session_id=h.message.session_id, seq=h.message.seq,
                                 message=to_public(h.message), bm25_score=h.bm25_score,
                                 rerank_score=h.rerank_score) for h in outcome.hits],
        reranked=outcome.reranked, query_lexemes=outcome.lexemes,
        query_dates=[QueryDate(year=d.year, month=d.month, day=d.day) for d in outcome.dates],
        candidates=outcome.candidates, promoted_seqs=promoted or [])


@router.post("/sessions/{session_id}/search", response_model=SearchPublic,
             summary="Search one session's full history")
async def search_session(
    session_id: uuid.UUID,
    body: Annotated[SessionSearchCreate, Body(openapi_examples=examples.SESSION)],
    caller: CallerDep, state: StateDep, env: SearchEnvDep,
) -> SearchPublic:
    """Search this session's full history: the conversation-aware BM25 top 50 (a message
    ranked with the turns around it), then LLM rerank, top `limit`.

    With `promote: true` the results are promoted into the session's context; 409 when
    they would not fit its budget (nothing is promoted then).
    """
    scope = SearchScope(tenant_id=caller.tenant_id, session_id=session_id)
    async with state.connection() as conn:
        await require_visible_pg(conn, caller, session_id)
        outcome = await service.search(conn, scope, body.query, limit=body.limit,
                                       rerank=body.rerank, llm=env.llm, redis=env.redis,
                                       options=env.options, after=body.after,
                                       before=body.before, ranking=body.ranking)
    promoted: list[int] = []
    if body.promote:
        async with transaction(state.sessionmaker) as db:
            session = visible_session(caller, await sessions_repository.get(
                db, caller.tenant_id, session_id))
            promoted = await service.promote_hits(db, session, outcome.hits)
    return _public(outcome, promoted)


@router.post("/search", response_model=SearchPublic,
             summary="Search an agent's or the tenant's sessions")
async def search_sessions(
    body: Annotated[SearchCreate, Body(openapi_examples=examples.SESSIONS)], caller: CallerDep,
    state: StateDep, env: SearchEnvDep,
) -> SearchPublic:
    """Search across the sessions of one agent (`scope=agent`) or of the tenant.

    `scope=agent` searches `agent_id`, by default the caller's effective agent (an agent
    key's own, or a service key's `X-Agent-Id`). Agent keys may not search another agent
    or the whole tenant (403).
    """
    if body.scope == "tenant":
        if caller.role == "agent":
            raise Forbidden("Agent keys search only their own agent's sessions.",
                            code="scope_forbidden")
        scope = SearchScope(tenant_id=caller.tenant_id)
    else:
        agent_id = body.agent_id or caller.require_agent()
        caller.require_agent_access(agent_id)
        scope = SearchScope(tenant_id=caller.tenant_id, agent_id=agent_id)
    async with state.connection() as conn:
        outcome = await service.search(conn, scope, body.query, limit=body.limit,
                                       rerank=body.rerank, llm=env.llm, redis=env.redis,
                                       options=env.options, after=body.after,
                                       before=body.before, ranking=body.ranking)
    return _public(outcome)

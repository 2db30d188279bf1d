"""The two search requests as the API answers them, for REST (`app.search.router`) and MCP
(`app.mcp`) alike: one session's history, or the sessions of an agent or of the tenant.
Who may search what is decided here, once."""

import uuid
from typing import Any

from app.auth.caller import Caller
from app.core import tracing
from app.core.db import transaction
from app.core.errors import BadRequest, Forbidden
from app.messages.service import to_public
from app.search import service
from app.search.deps import SearchEnv
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
from app.state import AppState
from app.users import access as users_access


def public(outcome: service.SearchOutcome, promoted: list[int] | None = None) -> SearchPublic:
    return SearchPublic(
        results=[
            SearchHitPublic(
                session_id=h.message.session_id,
                seq=h.message.seq,
                message=to_public(h.message),
                bm25_score=h.bm25_score,
                rerank_score=h.rerank_score,
            )
            for h in outcome.hits
        ],
        reranked=outcome.reranked,
        rerank_skipped=outcome.rerank_skipped,
        query_lexemes=outcome.lexemes,
        query_dates=[QueryDate(year=d.year, month=d.month, day=d.day) for d in outcome.dates],
        candidates=outcome.candidates,
        promoted_seqs=promoted or [],
    )


async def _search(
    conn: Any, scope: SearchScope, body: SessionSearchCreate | SearchCreate, env: SearchEnv
) -> service.SearchOutcome:
    """The search a request asks for, in `scope`, with the app's search environment."""
    store = scope.session_id or scope.user_id or scope.agent_id or scope.tenant_id
    with tracing.memory_span("search_memory", store, store_kind=scope.kind, query=body.query):
        return await service.search(
            conn,
            scope,
            body.query,
            limit=body.limit,
            rerank=body.rerank,
            llm=env.llm,
            cache=env.rerank_cache,
            options=env.options,
            after=body.after,
            before=body.before,
            ranking=body.ranking,
        )


async def search_session(
    state: AppState,
    env: SearchEnv,
    caller: Caller,
    session_id: uuid.UUID,
    body: SessionSearchCreate,
) -> SearchPublic:
    """One session's full history (404 `session_not_found` unless the caller may see it);
    with `promote` the results go into its context (409 when they would not fit)."""
    scope = SearchScope(tenant_id=caller.tenant_id, session_id=session_id)
    async with state.connection() as conn:
        await require_visible_pg(conn, caller, session_id)
        outcome = await _search(conn, scope, body, env)
    promoted: list[int] = []
    if body.promote:
        async with transaction(state.db_connection) as conn:
            row = await sessions_repository.get(conn, caller.tenant_id, session_id)
            session = visible_session(caller, row)
            promoted = await service.promote_hits(conn, session, outcome.hits)
    return public(outcome, promoted)


async def user_scope(state: AppState, caller: Caller, user_id: str | None) -> SearchScope:
    """`scope=user`: the user's sessions the caller may see (the user rule of
    `app.users.access`, then the session rule: an agent key, its own agent's)."""
    if user_id is None:
        raise BadRequest("scope=user needs user_id.", code="user_required")
    async with state.db_connection() as conn:
        await users_access.require_visible(conn, caller, user_id)
    agent = caller.agent_id if caller.role == "agent" else None
    return SearchScope(tenant_id=caller.tenant_id, user_id=user_id, agent_id=agent)


async def search_sessions(
    state: AppState, env: SearchEnv, caller: Caller, body: SearchCreate
) -> SearchPublic:
    """The sessions of one agent (`scope=agent`, by default the caller's effective agent)
    or of the tenant; agent keys may not search another agent or the tenant (403)."""
    if body.scope == "tenant":
        if caller.role == "agent":
            raise Forbidden(
                "Agent keys search only their own agent's sessions.", code="scope_forbidden"
            )
        scope = SearchScope(tenant_id=caller.tenant_id)
    elif body.scope == "user":
        scope = await user_scope(state, caller, body.user_id)
    else:
        agent_id = body.agent_id or caller.require_agent()
        caller.require_agent_access(agent_id)
        scope = SearchScope(tenant_id=caller.tenant_id, agent_id=agent_id)
    async with state.connection() as conn:
        outcome = await _search(conn, scope, body, env)
    return public(outcome)

"""search_stats: lazily folded, exact, and never making one search wait for another."""

import asyncio
import uuid

from app.search import repository
from app.search.scope import SearchScope
from tests.search.support import append
from tests.support.api import new_session


async def test_concurrent_searches_never_wait_for_the_stats_refresh(client, tenant, app):
    sid = await new_session(client)
    await append(client, sid, ["alpha beta", "gamma delta epsilon", "the"])
    scope = SearchScope(tenant_id=uuid.UUID(tenant.id), session_id=uuid.UUID(sid))
    pool = app.state.loom.pg
    async with pool.acquire() as first, pool.acquire() as second:
        tx1, tx2 = first.transaction(), second.transaction()
        await tx1.start()
        await tx2.start()
        lexemes, stats = await repository.prepare(first, scope, "alpha")
        assert lexemes == ["alpha"] and (stats.n_docs, stats.total_length) == (2, 5)
        # `first` holds the refresh (lock + new row) until it commits; `second` must not
        # wait for it, and must see the same exact figures.
        _, stats2 = await asyncio.wait_for(repository.prepare(second, scope, "alpha"), 5)
        assert (stats2.n_docs, stats2.total_length) == (2, 5)
        await tx1.commit()
        await tx2.rollback()
    async with app.state.loom.db_connection() as conn:
        row = await conn.fetchrow(
            "SELECT doc_count, total_length, through_seq FROM search_stats "
            "WHERE tenant_id = $1 AND session_id = $2",
            uuid.UUID(tenant.id),
            uuid.UUID(sid),
        )
        assert tuple(row) == (2, 5, 3)


async def test_stats_span_the_scope(client, tenant, app):
    a = await new_session(client, "agent-1")
    b = await new_session(client, "agent-2")
    await append(client, a, ["one two three"])
    await append(client, b, ["four five", "six"])
    tid = uuid.UUID(tenant.id)
    async with app.state.loom.pg.acquire() as conn:
        _, agent = await repository.prepare(conn, SearchScope(tid, agent_id="agent-2"), "x")
        _, everyone = await repository.prepare(conn, SearchScope(tid), "x")
    assert (agent.n_docs, agent.total_length) == (2, 3)
    assert (everyone.n_docs, everyone.total_length) == (3, 6)
    await append(client, a, ["seven eight"])
    async with app.state.loom.pg.acquire() as conn, conn.transaction():
        _, everyone = await repository.prepare(conn, SearchScope(tid), "x")
    assert (everyone.n_docs, everyone.total_length) == (4, 8)

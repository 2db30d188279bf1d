"""The hot paths' pool gives a connection back without resetting it (`app.core.pg`), so no
session-level state may survive a release: every hot path runs on an app whose pool holds
one connection, then that connection is compared with a fresh one (settings, LISTEN,
advisory locks, cursors, temp tables, an open transaction; prepared statements aside,
they are the point of the pool)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from app.core import pg
from app.core.config import Settings, libpq_dsn
from app.main import create_app
from app.state import app_state
from tests.support.api import make_client

STATE = """
SELECT (SELECT count(*) FROM pg_listening_channels()) AS listening,
       (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()
          AND locktype = 'advisory') AS advisory_locks,
       (SELECT count(*) FROM pg_cursors) AS cursors,
       (SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()) AS temp_rels,
       txid_current_if_assigned() AS xid
"""
SETTINGS = "SELECT name, setting FROM pg_settings ORDER BY name"


@pytest.fixture
async def one_connection_app(settings: Settings) -> AsyncIterator[Any]:
    application = create_app(
        settings.model_copy(update={"db_pool_size": 1, "key_cache_seconds": 0})
    )
    async with application.router.lifespan_context(application):
        yield application


async def session_state(conn: asyncpg.Connection) -> dict[str, Any]:
    return {
        "settings": {r["name"]: r["setting"] for r in await conn.fetch(SETTINGS)},
        **dict(await conn.fetchrow(STATE)),
        "in_transaction": conn.is_in_transaction(),
    }


async def exercise_hot_paths(c: httpx.AsyncClient) -> None:
    """Auth, append, context build (recall on), the three searches, a failed statement."""
    sid = (await c.post("/v1/sessions", json={"config": {"recall": {"enabled": True}}})).json()[
        "id"
    ]
    for n in range(6):
        resp = await c.post(
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [
                    {"role": "user", "content": f"where did the otter {n} swim?"},
                    {"role": "assistant", "content": f"the otter {n} swam in the river"},
                ]
            },
        )
        assert resp.status_code == 201, resp.text
    for body in ({}, {"recall": {"share": 0.2, "query": "otter river"}}):
        resp = await c.post(f"/v1/sessions/{sid}/context", json=body)
        assert resp.status_code == 200, resp.text
    for ranking in ("conversation", "message"):
        resp = await c.post(
            f"/v1/sessions/{sid}/search",
            json={"query": "otter river", "rerank": False, "ranking": ranking},
        )
        assert resp.status_code == 200, resp.text
    for scope in ("agent", "tenant"):
        resp = await c.post("/v1/search", json={"query": "otter", "scope": scope, "rerank": False})
        assert resp.status_code == 200, resp.text
    # a statement PostgreSQL refuses (a lone surrogate), and a session that is not there
    resp = await c.post(
        f"/v1/sessions/{sid}/messages",
        headers={"Content-Type": "application/json"},
        content=b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
    )
    assert resp.status_code == 422, resp.text
    resp = await c.post(
        f"/v1/sessions/{uuid.uuid4()}/messages",
        json={"messages": [{"role": "user", "content": "hi"}]},
    )
    assert resp.status_code == 404


async def test_no_session_state_survives_a_release(
    one_connection_app: Any, settings: Settings, tenant: Any
) -> None:
    state = app_state(one_connection_app)
    async with make_client(one_connection_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        await exercise_hot_paths(c)
    assert settings.database_url is not None
    fresh = await asyncpg.connect(
        libpq_dsn(settings.database_url), server_settings=pg.pool_server_settings(settings)
    )
    try:
        clean = await session_state(fresh)
    finally:
        await fresh.close()
    async with state.connection() as conn:
        used = await session_state(conn)
        # the one connection of the pool is the one every request above ran on
        assert await conn.fetchval("SELECT count(*) FROM pg_prepared_statements") > 0
    changed = {
        k: (v, used["settings"].get(k))
        for k, v in clean["settings"].items()
        if used["settings"].get(k) != v
    }
    assert not changed
    # (`cursors` counts the portal of the query that reads them: one on both)
    assert used == clean
    assert clean["xid"] is None and not clean["in_transaction"] and not clean["listening"]


async def test_a_transaction_left_open_is_rolled_back_on_release(one_connection_app: Any) -> None:
    pool = app_state(one_connection_app).pg
    async with pool.acquire() as conn:
        await conn.execute("BEGIN")
        await conn.execute("SET LOCAL work_mem = '7MB'")
    async with pool.acquire() as conn:
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SHOW work_mem") != "7MB"

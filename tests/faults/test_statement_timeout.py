"""The statement timeout of LOOM_DB_STATEMENT_TIMEOUT_SECONDS: the server cancels a slow
statement (503 database_unavailable with Retry-After) and the connection stays usable."""

from __future__ import annotations

import time

import asyncpg
import pytest

from app.core import pg
from app.core.config import Settings
from app.core.db_errors import is_connection_error, map_db_error


@pytest.mark.parametrize("generic_plans", [True, False], ids=["hot pool", "routes pool"])
async def test_slow_statement_is_cancelled_within_the_bound(
    settings: Settings, generic_plans: bool
) -> None:
    assert settings.database_url
    s = settings.model_copy(update={"db_statement_timeout_seconds": 0.5})
    pool = await pg.create_pool(settings.database_url, s, size=1, generic_plans=generic_plans)
    try:
        async with pg.connection(pool, 5.0) as conn:
            started = time.monotonic()
            with pytest.raises(asyncpg.exceptions.QueryCanceledError) as info:
                await conn.execute("SELECT pg_sleep(3)")
            took = time.monotonic() - started
            assert await conn.fetchval("SELECT 1") == 1  # still usable
        assert took < 1.5, took
        assert not is_connection_error(info.value)
        mapped = map_db_error(info.value)
        assert mapped is not None and mapped.status_code == 503
        assert mapped.code == "database_unavailable"
        assert mapped.headers and int(mapped.headers["Retry-After"]) >= 1
    finally:
        await pg.close(pool)

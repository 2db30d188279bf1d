"""The statement timeout of LOOM_DB_STATEMENT_TIMEOUT_SECONDS: the server cancels a slow
statement (503 database_unavailable with Retry-After) and the connection stays usable."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from app.core.config import Settings
from app.core.db import create_engine
from app.core.db_errors import is_connection_error, map_db_error


async def test_slow_statement_is_cancelled_within_the_bound(settings: Settings) -> None:
    assert settings.database_url
    s = settings.model_copy(update={"db_statement_timeout_seconds": 0.5})
    engine = create_engine(settings.database_url, 1, s)
    try:
        async with engine.connect() as conn:
            started = time.monotonic()
            with pytest.raises(sa.exc.DBAPIError) as info:
                await conn.execute(sa.text("SELECT pg_sleep(3)"))
            took = time.monotonic() - started
            await conn.rollback()
            assert (await conn.execute(sa.text("SELECT 1"))).scalar() == 1  # still usable
        assert took < 1.5, took
        assert not is_connection_error(info.value)
        mapped = map_db_error(info.value)
        assert mapped is not None and mapped.status_code == 503
        assert mapped.code == "database_unavailable"
        assert mapped.headers and int(mapped.headers["Retry-After"]) >= 1
    finally:
        await engine.dispose()

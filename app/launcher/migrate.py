"""Run Alembic migrations programmatically (`loom-memory migrate`, embedded start, tests).

The migration scripts are the repository's top-level `alembic/`; the wheel carries them
inside the package as `app/alembic` (the build backend's force-include, see pyproject.toml).
Alembic is configured here rather than from an ini file, so an installed wheel migrates
from any directory. The repository's `alembic.ini` points at the same scripts for
developers' `alembic revision`.
"""

import asyncio
import logging
import time
from pathlib import Path

import asyncpg
from alembic import command
from alembic.config import Config


def _scripts() -> Path:
    """The installed package's copy of the scripts, else the checkout's `alembic/`."""
    package = Path(__file__).resolve().parents[1]
    shipped = package / "alembic"
    return shipped if (shipped / "env.py").is_file() else package.parent / "alembic"


MIGRATIONS = _scripts()


log = logging.getLogger("loom.migrate")

# a server that is not accepting connections yet (starting, in recovery, or an image's init
# server listening on its socket only): worth waiting for; anything else (a wrong password,
# no such database) is an answer
NOT_YET = (
    OSError,
    TimeoutError,
    asyncpg.CannotConnectNowError,
    asyncpg.ConnectionDoesNotExistError,
)


def wait_for_database(database_url: str, seconds: float, *, interval: float = 1.0) -> None:
    """Return once the server accepts a connection (`SELECT 1`), trying for `seconds`; the
    last error is raised when it never does."""
    from app.core.config import libpq_dsn

    async def ping() -> None:
        conn = await asyncpg.connect(libpq_dsn(database_url), timeout=5)
        try:
            await conn.fetchval("SELECT 1")
        finally:
            await conn.close()

    deadline = time.monotonic() + seconds
    while True:
        try:
            asyncio.run(ping())
            return
        except NOT_YET as exc:
            if time.monotonic() + interval > deadline:
                raise
            log.warning("waiting for the database (%s)", type(exc).__name__)
            time.sleep(interval)


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def upgrade(database_url: str, *, partitions: int | None = None) -> None:
    """Bring the database to every head (domains add their own migration branches).

    `partitions`: hash-partition the tenant-owned tables into this many partitions when
    migration 0013 runs (None: `LOOM_PARTITIONS`; see `app.core.partitions`)."""
    cfg = alembic_config(database_url)
    if partitions is not None:
        cfg.attributes["partitions"] = partitions
    command.upgrade(cfg, "heads")


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)

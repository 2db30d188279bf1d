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
from dataclasses import dataclass
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


def heads() -> tuple[str, ...]:
    """The latest revision of each branch of the scripts (the schema `upgrade` reaches)."""
    from alembic.script import ScriptDirectory

    return tuple(sorted(ScriptDirectory.from_config(alembic_config("")).get_heads()))


def current(database_url: str) -> tuple[str, ...]:
    """The revisions the database is at (empty: never migrated)."""
    from app.core.config import libpq_dsn

    async def read() -> tuple[str, ...]:
        conn = await asyncpg.connect(libpq_dsn(database_url), timeout=30)
        try:
            if await conn.fetchval("SELECT to_regclass('alembic_version')") is None:
                return ()
            rows = await conn.fetch("SELECT version_num FROM alembic_version")
            return tuple(sorted(r[0] for r in rows))
        finally:
            await conn.close()

    return asyncio.run(read())


@dataclass(frozen=True)
class Migrated:
    """What `migrate` did: the revisions before and after, and how many ran."""

    before: tuple[str, ...]
    after: tuple[str, ...]
    steps: int

    def line(self) -> str:
        """One line for the terminal: `migrated from X to Y (n migrations)` or `already at
        Y` (each the latest schema)."""
        after = ", ".join(self.after)
        if self.before == self.after:
            return f"already at {after}, the latest schema"
        plural = "s" if self.steps != 1 else ""
        before = ", ".join(self.before) if self.before else "an empty database"
        return (
            f"migrated from {before} to {after}, the latest schema ({self.steps} migration{plural})"
        )


def steps_between(before: tuple[str, ...], after: tuple[str, ...]) -> int:
    """The revisions an upgrade from `before` to `after` runs."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(""))
    reached = {r.revision for r in script.iterate_revisions(after, "base")}
    had = {r.revision for r in script.iterate_revisions(before, "base")} if before else set()
    return len(reached - had)


def migrate(database_url: str) -> Migrated:
    """`upgrade`, saying what it did (`Migrated.line`)."""
    before = current(database_url)
    upgrade(database_url)
    after = current(database_url)
    return Migrated(before, after, steps_between(before, after))


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)

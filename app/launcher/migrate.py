"""Run Alembic migrations programmatically (`loom-memory migrate`, embedded start, tests).

The migration scripts are the repository's top-level `alembic/`; the wheel carries them
inside the package as `app/alembic` (the build backend's force-include, see pyproject.toml).
Alembic is configured here rather than from an ini file, so an installed wheel migrates
from any directory. The repository's `alembic.ini` points at the same scripts for
developers' `alembic revision`.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg

if TYPE_CHECKING:
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
    from alembic.config import Config

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
    from alembic import command

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


def _assigned(tree: ast.Module) -> dict[str, object]:
    """The module-level constants a script assigns (`revision`, `down_revision`...)."""
    out: dict[str, object] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            if isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
        if target in ("revision", "down_revision") and value is not None:
            try:
                out[target] = ast.literal_eval(value)
            except ValueError:
                continue
    return out


def script_heads() -> tuple[str, ...]:
    """`heads()` read from the scripts' text, without importing Alembic (a second or
    more of an API start on a loaded machine): the revisions no script follows.
    `tests/core/test_migrate_fast_path.py` holds the two equal."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = _assigned(ast.parse(path.read_text(encoding="utf-8")))
        revision, down = found.get("revision"), found.get("down_revision")
        if not isinstance(revision, str):
            continue
        revisions.add(revision)
        if isinstance(down, str):
            followed.add(down)
        elif isinstance(down, tuple | list):
            followed.update(d for d in down if isinstance(d, str))
    return tuple(sorted(revisions - followed))


def migrate(database_url: str, *, quick: bool = False) -> Migrated:
    """`upgrade`, saying what it did (`Migrated.line`). `quick` (a start of `serve`): a
    database already at the scripts' heads is left as it is without running Alembic at
    all; `loom-memory migrate` always runs it (on a Citus coordinator its environment also
    distributes what is not distributed yet)."""
    before = current(database_url)
    if quick and before and before == script_heads():
        return Migrated(before, before, 0)
    upgrade(database_url)
    after = current(database_url)
    return Migrated(before, after, steps_between(before, after))


def downgrade(database_url: str, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(database_url), revision)

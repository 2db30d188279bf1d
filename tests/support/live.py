"""Start real API processes (uvicorn subprocesses) against the test database and Redis."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settings_env(settings, **extra: str) -> dict[str, str]:
    """Environment for a subprocess that should use the same stores as `settings`."""
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "LOOM_ADMIN_KEY": settings.admin_key.get_secret_value() if settings.admin_key else "",
        "LOOM_QUEUE_NAME": settings.queue_name,
        "LOOM_MIGRATE_ON_START": "false",
        "LOOM_RUN_WORKER": "false",
    })
    env.update(extra)
    return env


@contextmanager
def live_api(settings, **extra_env: str) -> Iterator[str]:
    """An API process on a free port; yields its base URL and always stops it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--no-worker", "--port", str(port)],
        env=settings_env(settings, **extra_env), cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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

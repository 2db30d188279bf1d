"""The multi-process metrics directory (`PROMETHEUS_MULTIPROC_DIR`, see `app.core.metrics`).

prometheus_client reads the variable once, when it is imported, so this module imports
nothing of it: the command line calls these first. `serve` gives its API processes and
its worker one directory, emptied on start: the one set in the environment (or `.env`),
else a new temporary directory that it removes when it stops. Processes started some other
way share a directory by having the variable set; their operator empties it before starting
them (prometheus_client's rule), and it must not be shared across hosts or containers
(files are named by process id).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"
PREFIX = "loom-metrics-"


def export(configured: Path | None) -> None:
    """Put a directory named only in `.env` (Settings) into the environment, where
    prometheus_client looks."""
    if configured is not None and not os.environ.get(ENV):
        os.environ[ENV] = str(configured)


class ServeMetricsDir:
    """The directory of one `serve` run, in the environment its children inherit: the
    configured one, emptied, else `<temp dir>/loom-metrics-<pid>`, removed when it stops
    (and by the next start when the run was killed)."""

    def __init__(self, configured: Path | None) -> None:
        if configured is not None:
            self.path, self.owned = configured, False
            self.path.mkdir(parents=True, exist_ok=True)
            for stale in self.path.glob("*.db"):  # an earlier run's processes
                stale.unlink(missing_ok=True)
        else:
            root = Path(tempfile.gettempdir())
            for old in root.glob(f"{PREFIX}*"):
                pid = old.name.removeprefix(PREFIX)
                if pid.isdigit() and not alive(int(pid)):
                    shutil.rmtree(old, ignore_errors=True)
            self.path, self.owned = root / f"{PREFIX}{os.getpid()}", True
            shutil.rmtree(self.path, ignore_errors=True)
            self.path.mkdir(mode=0o700)
        os.environ[ENV] = str(self.path.resolve())

    def remove(self) -> None:
        if self.owned:
            shutil.rmtree(self.path, ignore_errors=True)


def alive(pid: int) -> bool:
    """A process with this id exists (on this host's process namespace)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True

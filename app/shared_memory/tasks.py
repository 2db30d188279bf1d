"""arq jobs of shared memory: the periodic TTL sweep."""

import json
import logging
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from app.models.shared_memory_entry import EntryRow
from app.shared_memory import repository
from app.shared_memory.metrics import EXPIRED_DELETED
from app.shared_memory.runtime import CHANNEL
from app.state import worker_state

log = logging.getLogger("loom.shared_memory")
BATCH = 1000


async def cleanup_expired_shared_memory(ctx: dict[str, Any]) -> int:
    """Delete expired, unreferenced entries in batches; tell API processes (cache, watch).

    Idempotent and safe to run concurrently (rows are claimed with SKIP LOCKED).
    """
    state = worker_state(ctx)
    total = 0
    while True:
        async with state.db_connection() as conn, conn.transaction():
            gone = await repository.delete_expired(conn, datetime.now(UTC), BATCH)
        total += len(gone)
        await _announce(state.redis, gone)
        if len(gone) < BATCH:
            break
    if total:
        EXPIRED_DELETED.inc(total)
        log.info("shared memory: %d expired entries deleted", total)
    return total


async def _announce(redis: Redis, rows: list[EntryRow]) -> None:
    if not rows:
        return
    now = datetime.now(UTC).isoformat()
    try:
        pipe = redis.pipeline(transaction=False)
        for r in rows:
            pipe.publish(
                CHANNEL,
                json.dumps(
                    {
                        "op": "delete",
                        "reason": "expired",
                        "t": str(r.tenant_id),
                        "ns": r.namespace,
                        "sc": r.scope_id,
                        "sk": r.storage_key,
                        "v": r.version,
                        "at": now,
                        "o": "worker",
                    },
                    separators=(",", ":"),
                ),
            )
        await pipe.execute()
    except Exception as exc:  # expired entries are never served anyway; events are a courtesy
        log.warning("expiry events not published: %s", type(exc).__name__)

"""Erased data leaves what API processes cache, in every process.

The runner publishes one "erase" event per erased session (and per erased agent memory) on
the shared-memory channel every API process listens to (`app.shared_memory.runtime`);
each process then drops, for those sessions, the shared-memory tier's entries of their
`session` scope (offloaded tool results included), the context builds' recall reads
(`app.context.swap_recall`) and the heuristic stand-ins of their summaries
(`app.memory.aggregate`); for an agent, its `agent` namespace entries. A process that missed
the event (subscription down) bypasses and then clears its tier on reconnect, and the other
caches are only reached through a session lookup, which the tombstone already answers 404.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from app.shared_memory.runtime import CHANNEL, SharedMemoryRuntime

log = logging.getLogger("loom.erasure")


def purge_event(
    tenant_id: uuid.UUID, *, sessions: Iterable[uuid.UUID] = (), agents: Iterable[str] = ()
) -> dict[str, Any]:
    return {
        "op": "erase",
        "t": str(tenant_id),
        "sessions": [str(s) for s in sessions],
        "agents": list(agents),
        "o": "erasure",
    }


async def publish(redis: Any, event: dict[str, Any]) -> None:
    if redis is None:
        return
    try:
        await redis.publish(CHANNEL, json.dumps(event, separators=(",", ":")))
    except Exception as exc:  # the processes clear their tiers when they reconnect
        log.warning("erasure cache purge not published: %s", type(exc).__name__)


def purge(rt: SharedMemoryRuntime, event: dict[str, Any]) -> None:
    """Drop this process's cached copies of what `event` names."""
    from app.context import swap_recall as recall
    from app.memory import aggregate as state

    tenant = str(event.get("t"))
    sessions = {str(s) for s in event.get("sessions") or ()}
    agents = {str(a) for a in event.get("agents") or ()}

    def erased_scope(key: Any) -> bool:
        return (
            isinstance(key, tuple)
            and len(key) == 4
            and key[0] == tenant
            and (
                (key[1] == "session" and key[2] in sessions)
                or (key[1] == "agent" and key[2] in agents)
            )
        )

    rt.tier.drop_where(erased_scope)
    if sessions:
        for cache in (recall._CACHE, recall._LOADED):
            for key in [k for k in cache._items if str(k[1]) in sessions]:
                cache._items.pop(key, None)
        for key in [k for k in state._STAND_INS if str(k[0]) in sessions]:
            state._STAND_INS.pop(key, None)


def install(rt: SharedMemoryRuntime) -> None:
    """Make `rt`'s process purge its caches on every erase event."""
    rt.on_erase.append(lambda event: purge(rt, event))

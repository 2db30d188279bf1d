"""Erased data leaves what API processes cache, in every process.

The runner publishes one "erase" event per erased session (and per erased agent memory) on
the shared-memory channel every API process listens to (`app.shared_memory.runtime`);
each process then drops, for those sessions, the shared-memory tier's entries of their
`session` scope (offloaded tool results included) and every cache of the process's state
(`app.state.Caches`: recall reads, stand-ins...) through the one registry `app.wiring.caches`
assembles; for an agent, its `agent` namespace entries. A process that missed the event
(subscription down) bypasses and then clears its tier on reconnect, and the other caches
are only reached through a session lookup, which the tombstone already answers 404.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis

from app.shared_memory.runtime import CHANNEL, SharedMemoryRuntime
from app.state import AppState

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


async def publish(redis: Redis | None, event: dict[str, Any]) -> None:
    if redis is None:
        return
    try:
        await redis.publish(CHANNEL, json.dumps(event, separators=(",", ":")))
    except Exception as exc:  # the processes clear their tiers when they reconnect
        log.warning("erasure cache purge not published: %s", type(exc).__name__)


def purge(state: AppState, event: dict[str, Any]) -> None:
    """Drop this process's cached copies of what `event` names: the shared-memory tier's
    entries, and every cache of `state.caches` (`Caches.forget`)."""
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

    state.parts[SharedMemoryRuntime].tier.drop_where(erased_scope)
    try:
        tenant_id, session_ids = uuid.UUID(tenant), [uuid.UUID(s) for s in sessions]
    except ValueError:
        log.warning("erase event with a malformed tenant or session id ignored")
        return
    state.caches.forget(tenant_id, session_ids)


def install(state: AppState) -> None:
    """Make `state`'s process purge its caches on every erase event."""
    state.parts[SharedMemoryRuntime].on_erase.append(lambda event: purge(state, event))

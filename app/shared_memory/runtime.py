"""Per-process shared-memory runtime: memory tier, Redis pub/sub fan-out, watchers, counters.

One Redis channel carries every put/delete of every API process. Each process
- invalidates its memory tier for writes made elsewhere (version floors, see `tier`),
- hands events to its local SSE watchers (so a watcher sees writes made through any process),
- flushes its read/write/hit/miss counters to a Redis hash once a second.

Degraded mode: while the subscription is down the memory tier is bypassed (a missed
invalidation could otherwise serve stale data) and cleared on reconnect; events are then
delivered to this process's watchers only.
"""

import asyncio
import contextlib
import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from app.shared_memory.tier import MemoryTier
from app.shared_memory.watch import Watcher

log = logging.getLogger("loom.shared_memory")

CHANNEL = "loom:shared-memory:events"
STATS_KEY = "loom:shared-memory:stats:{tenant}"
STAT_NAMES = ("reads", "writes", "hits", "misses")


class SharedMemoryRuntime:
    def __init__(self, redis: Any, *, cache_bytes: int, watch_queue: int = 256) -> None:
        self.redis = redis
        self.tier = MemoryTier(cache_bytes)
        self.origin = uuid.uuid4().hex
        self.watch_queue = watch_queue
        self.connected = False
        self._watchers: dict[tuple[str, str, str], set[Watcher]] = {}
        self._counters: Counter[tuple[str, str, str]] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        # called with every "erase" event (app.erasure.caches: a subject's data leaves
        # every cache of this process)
        self.on_erase: list[Callable[[dict[str, Any]], None]] = []

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self, wait: float = 2.0) -> None:
        self._task = asyncio.create_task(self._listen(), name="shared-memory-pubsub")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._subscribed.wait(), wait)

    async def stop(self) -> None:
        for group in list(self._watchers.values()):
            for w in list(group):
                w.close("shutdown")
        if self._task is not None:
            self._task.cancel()
            # bounded: on Python 3.11 a cancel racing redis-py's read timeout can be
            # swallowed, and awaiting the task would then never return
            await asyncio.wait({self._task}, timeout=2)
        await self._flush_counters()

    @property
    def cache_enabled(self) -> bool:
        return self.connected and self.tier.max_bytes > 0

    # -- counters --------------------------------------------------------------------------
    def count(self, tenant: str, namespace: str, name: str, n: int = 1) -> None:
        self._counters[(tenant, namespace, name)] += n

    def local_counts(self, tenant: str) -> Counter[tuple[str, str]]:
        return Counter(
            {(ns, name): v for (t, ns, name), v in self._counters.items() if t == tenant}
        )

    async def read_counts(self, tenant: str) -> Counter[tuple[str, str]]:
        """Counters of every process (Redis) plus this process's unflushed ones."""
        out = self.local_counts(tenant)
        try:
            raw = await self.redis.hgetall(STATS_KEY.format(tenant=tenant))
        except Exception:
            return out
        for field, value in raw.items():
            f = field.decode() if isinstance(field, bytes) else field
            ns, _, name = f.partition(":")
            out[(ns, name)] += int(value)
        return out

    async def _flush_counters(self) -> None:
        if not self._counters:
            return
        pending, self._counters = self._counters, Counter()
        try:
            pipe = self.redis.pipeline(transaction=False)
            for (tenant, ns, name), n in pending.items():
                pipe.hincrby(STATS_KEY.format(tenant=tenant), f"{ns}:{name}", n)
            await pipe.execute()
        except Exception:
            self._counters.update(pending)  # keep them for the next try

    # -- events ----------------------------------------------------------------------------
    async def publish(self, event: dict[str, Any]) -> None:
        """Send a put/delete event to every process (or only to this one if Redis is down)."""
        event = {**event, "o": self.origin}
        try:
            await self.redis.publish(CHANNEL, json.dumps(event, separators=(",", ":")))
            if self.connected:
                return  # our own listener will dispatch it with everyone else's
        except Exception as exc:
            log.warning("shared-memory publish failed: %s", type(exc).__name__)
        self._dispatch(event)

    def _dispatch(self, event: dict[str, Any]) -> None:
        if event.get("op") == "erase":
            for fn in self.on_erase:
                fn(event)
            return
        if event.get("o") != self.origin:
            self.tier.invalidate(
                (event["t"], event["ns"], event["sc"], event["sk"]), event.get("v")
            )
        for w in list(self._watchers.get((event["t"], event["ns"], event["sc"]), ())):
            if event["sk"].startswith(w.storage_prefix):
                w.offer(event)

    def add_watcher(self, tenant: str, namespace: str, scope: str, storage_prefix: str) -> Watcher:
        w = Watcher(storage_prefix, self.watch_queue)
        self._watchers.setdefault((tenant, namespace, scope), set()).add(w)
        return w

    def remove_watcher(self, tenant: str, namespace: str, scope: str, w: Watcher) -> None:
        group = self._watchers.get((tenant, namespace, scope))
        if group is not None:
            group.discard(w)
            if not group:
                self._watchers.pop((tenant, namespace, scope), None)

    async def _listen(self) -> None:
        backoff = 0.2
        while True:
            pubsub = None
            try:
                pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
                await pubsub.subscribe(CHANNEL)
                # Anything cached before (or while disconnected) may have missed invalidations.
                self.tier.clear()
                self.connected = True
                self._subscribed.set()
                backoff = 0.2
                loop = asyncio.get_running_loop()
                next_flush = loop.time() + 1.0
                while True:
                    msg = await pubsub.get_message(timeout=0.5)
                    if msg is not None and msg.get("type") == "message":
                        try:
                            self._dispatch(json.loads(msg["data"]))
                        except (ValueError, KeyError, TypeError):
                            log.warning("malformed shared-memory event ignored")
                    if loop.time() >= next_flush:
                        await self._flush_counters()
                        next_flush = loop.time() + 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.connected:
                    log.warning("shared-memory pub/sub lost: %s", type(exc).__name__)
                self.connected = False
                self._subscribed.set()  # start() must not wait for a Redis that is down
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()

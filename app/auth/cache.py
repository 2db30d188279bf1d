"""A per-process cache of resolved API keys, so most requests skip the key lookup.

Revocation must take effect on the next request in every API process, so:
- the revoking process drops the entry at once and publishes the key's hash on Redis;
- every process listens on that channel and drops the entry it holds;
- while a process is not subscribed (Redis down, reconnecting) it does not use the cache
  at all, and it empties it on (re)subscribing, so a revocation it may have missed
  cannot be served from memory;
- entries also expire after `ttl` seconds as a last bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from redis.asyncio import Redis

log = logging.getLogger("loom.auth")

CHANNEL = "loom:auth:revoked"


class KeyCache:
    """Resolved keys by their hash, and the bootstrap admin key's hash (`admin_hash`, None
    without one), so a request hashes its key once."""

    def __init__(
        self,
        redis: Redis,
        ttl: float = 30.0,
        max_entries: int = 10_000,
        admin_hash: str | None = None,
    ) -> None:
        self.redis = redis
        self.admin_hash = admin_hash
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: dict[str, tuple[Any, float]] = {}
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    @property
    def active(self) -> bool:
        return self._subscribed.is_set()

    def get(self, key_hash: str) -> Any | None:
        if not self.active:
            return None
        hit = self._entries.get(key_hash)
        if hit is None:
            return None
        value, expires = hit
        if expires < time.monotonic():
            self._entries.pop(key_hash, None)
            return None
        return value

    def put(self, key_hash: str, value: Any) -> None:
        if not self.active:
            return
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[key_hash] = (value, time.monotonic() + self.ttl)

    def drop(self, key_hash: str) -> None:
        self._entries.pop(key_hash, None)

    async def revoked(self, key_hash: str) -> None:
        """Drop a revoked key here and tell every other process."""
        self.drop(key_hash)
        try:
            await self.redis.publish(CHANNEL, key_hash)
        except Exception as exc:  # others stop caching while they cannot hear us
            log.warning("could not publish a key revocation: %s", type(exc).__name__)

    async def start(self, wait: float = 2.0) -> None:
        self._task = asyncio.create_task(self._listen(), name="auth-key-cache")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._subscribed.wait(), wait)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # bounded: on Python 3.11 a cancel racing redis-py's read timeout can be
            # swallowed, and awaiting the task would then never return
            await asyncio.wait({self._task}, timeout=2)

    async def _listen(self) -> None:
        delay = 0.5
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(CHANNEL)
                self._entries.clear()
                self._subscribed.set()
                delay = 0.5
                while True:
                    # short waits: the client's socket timeout must not end the subscription
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message and message.get("type") == "message":
                        data = message["data"]
                        self.drop(data.decode() if isinstance(data, bytes) else str(data))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("key cache unsubscribed (%s); not caching", type(exc).__name__)
            finally:
                self._subscribed.clear()
                self._entries.clear()
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

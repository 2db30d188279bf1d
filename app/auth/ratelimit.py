"""Per-key token bucket in Redis (off unless LOOM_RATE_LIMIT_PER_SECOND > 0)."""

import logging
import time
from collections.abc import Awaitable
from typing import Any, cast

import redis.asyncio as aioredis

log = logging.getLogger("loom.ratelimit")

# KEYS[1] bucket; ARGV rate, burst, now. Returns {allowed, seconds_until_a_token}.
_BUCKET = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + (now - ts) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return {allowed, tostring(wait)}
"""


async def take_token(redis: aioredis.Redis, key_id: str, rate: float, burst: int) -> float | None:
    """Take one token; None if allowed, else seconds to wait. Fails open if Redis is down."""
    try:
        # redis-py annotates eval for its sync and async clients at once (`Awaitable[str] |
        # str`); on redis.asyncio it is always awaitable and this script answers a list.
        # The arguments go as text, as redis-py would encode the numbers anyway.
        reply = redis.eval(_BUCKET, 1, f"loom:rl:{key_id}", str(rate), str(burst), str(time.time()))
        allowed, wait = await cast(Awaitable[list[Any]], reply)
    except Exception as exc:
        log.warning("rate limiter unavailable (%s); allowing", type(exc).__name__)
        return None
    return None if int(allowed) == 1 else float(wait)

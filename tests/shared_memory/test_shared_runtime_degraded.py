"""With Redis unreachable the runtime degrades: no memory tier, local-only watch events."""

import redis.asyncio as aioredis

from app.shared_memory.runtime import SharedMemoryRuntime
from tests.support.live import free_port


async def test_runtime_without_redis_bypasses_tier_and_delivers_locally():
    # a port just freed: nothing listens there
    client = aioredis.Redis(
        host="127.0.0.1", port=free_port(), socket_connect_timeout=0.2, socket_timeout=0.2
    )
    rt = SharedMemoryRuntime(client, cache_bytes=10_000)
    try:
        await rt.start(wait=1.0)
        assert not rt.connected and not rt.cache_enabled
        w = rt.add_watcher("t", "global", "", "party/")
        await rt.publish({"op": "put", "t": "t", "ns": "global", "sc": "", "sk": "party/x", "v": 5})
        await rt.publish({"op": "put", "t": "t", "ns": "global", "sc": "", "sk": "other", "v": 6})
        assert w.queue.qsize() == 1 and w.queue.get_nowait()["sk"] == "party/x"
        rt.count("t", "global", "reads")
        assert (await rt.read_counts("t"))[("global", "reads")] == 1
    finally:
        await rt.stop()
        await client.aclose()

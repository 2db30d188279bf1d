"""Redis client creation; callers must degrade when Redis is down."""

import redis.asyncio as aioredis
from arq.connections import RedisSettings


def create_redis(url: str) -> aioredis.Redis:
    return aioredis.Redis.from_url(
        url, socket_connect_timeout=1, socket_timeout=2, health_check_interval=30
    )


def arq_settings(url: str) -> RedisSettings:
    """arq settings from a redis:// or unix:// URL (the embedded default uses a socket)."""
    if url.startswith("unix://"):
        path = url[len("unix://") :].split("?")[0]
        return RedisSettings(unix_socket_path=path, conn_timeout=1, conn_retries=0)
    settings = RedisSettings.from_dsn(url)
    settings.conn_timeout = 1
    settings.conn_retries = 0
    return settings

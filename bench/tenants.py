"""A fresh tenant and its service key, through the admin API of an app the bench runs
in-process (httpx's ASGI transport), and a scratch database for a bench run."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx

from app.launcher.migrate import upgrade
from tests.fakes.llm_server import FakeLLMServer


async def fresh_tenant(
    transport: httpx.ASGITransport, admin_key: str, prefix: str
) -> tuple[str, str]:
    """(tenant id, service key secret) of a new tenant named `<prefix>-<hex>`."""
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://b",
        timeout=600,
        headers={"Authorization": f"Bearer {admin_key}"},
    ) as a:
        r = await a.post("/v1/tenants", json={"name": f"{prefix}-{uuid.uuid4().hex[:6]}"})
        tid = r.json()["id"]
        r = await a.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
        return tid, r.json()["secret"]


@asynccontextmanager
async def scratch_database(pg: str, prefix: str) -> AsyncIterator[tuple[str, FakeLLMServer]]:
    """A fresh, migrated database `<prefix>_<hex>` on the PostgreSQL at `pg` (its URL for
    the app) and a running fake Messages API; both gone afterwards."""
    name = f"{prefix}_{secrets.token_hex(3)}"
    conn = await asyncpg.connect(f"{pg}/postgres")
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    db_url = f"{pg}/{name}".replace("postgresql://", "postgresql+asyncpg://")
    fake = FakeLLMServer().start()
    try:
        await asyncio.to_thread(upgrade, db_url)
        yield db_url, fake
    finally:
        fake.stop()
        conn = await asyncpg.connect(f"{pg}/postgres")
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()

"""Fault-test fixtures: a private PostgreSQL and a private redis-server per module, and an
API (in process, its lifespan run) on them. Tests freeze, stop, restart or cut these stores
only; the machine's servers are never touched."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from app.launcher.migrate import upgrade
from app.main import create_app
from tests.support.live import PrivatePostgres, PrivateRedis


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres()
    try:
        upgrade(pg.url)
        yield pg
    finally:
        pg.close()


@pytest.fixture(scope="module")
def private_redis() -> Iterator[PrivateRedis]:
    try:
        server = PrivateRedis()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


@dataclass
class Api:
    app: Any
    client: httpx.AsyncClient  # the tenant's service key, X-Agent-Id: a
    admin: httpx.AsyncClient
    session_id: str


def fault_settings(pg: PrivatePostgres, redis: PrivateRedis, **over: Any) -> Settings:
    values: dict[str, Any] = {
        "DATABASE_URL": pg.url,
        "REDIS_URL": redis.url,
        "LOOM_ADMIN_KEY": "lm_fault_" + secrets.token_urlsafe(16),
        "LOOM_QUEUE_NAME": f"loom:fault:{uuid.uuid4().hex[:8]}",
        # reads go to PostgreSQL, not the in-process tier
        "LOOM_SHARED_MEMORY_CACHE_BYTES": 0,
    }
    values.update(over)
    return Settings(**values)


@pytest.fixture
async def api(private_pg: PrivatePostgres, private_redis: PrivateRedis) -> AsyncIterator[Api]:
    settings = fault_settings(private_pg, private_redis)
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        assert settings.admin_key is not None
        admin = httpx.AsyncClient(
            transport=transport,
            base_url="http://t",
            timeout=60,
            headers={"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"},
        )
        tenant = (
            await admin.post("/v1/tenants", json={"name": f"faults-{uuid.uuid4().hex[:8]}"})
        ).json()
        key = (
            await admin.post("/v1/api-keys", json={"tenant_id": tenant["id"], "role": "service"})
        ).json()["secret"]
        client = httpx.AsyncClient(
            transport=transport,
            base_url="http://t",
            timeout=60,
            headers={"Authorization": f"Bearer {key}", "X-Agent-Id": "a"},
        )
        sid = (await client.post("/v1/sessions", json={})).json()["id"]
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={
                "messages": [
                    {"role": "user", "content": "where is the hello world deployment"},
                    {"role": "assistant", "content": "hello world runs in region west"},
                ]
            },
        )
        assert r.status_code == 201, r.text
        r = await client.put("/v1/shared-memory/global/k1", json={"value": {"v": 1}})
        assert r.status_code in (200, 201), r.text
        try:
            yield Api(application, client, admin, sid)
        finally:
            await client.aclose()
            await admin.aclose()


def routes(sid: str) -> list[tuple[str, str, str, Any]]:
    """(name, method, path, body) of the routes the fault tests drive."""
    return [
        (
            "append",
            "POST",
            f"/v1/sessions/{sid}/messages",
            {"messages": [{"role": "user", "content": "hello again"}]},
        ),
        ("context", "POST", f"/v1/sessions/{sid}/context", {}),
        ("search", "POST", f"/v1/sessions/{sid}/search", {"query": "hello world"}),
        ("shared", "GET", "/v1/shared-memory/global/k1", None),
        ("session", "GET", f"/v1/sessions/{sid}", None),
    ]


@dataclass
class Result:
    name: str
    started: float
    elapsed: float
    status: int
    body: str
    retry_after: str | None


async def call(client: httpx.AsyncClient, name: str, method: str, path: str, body: Any) -> Result:
    started = time.monotonic()
    r = await client.request(method, path, json=body)
    return Result(
        name,
        started,
        time.monotonic() - started,
        r.status_code,
        r.text,
        r.headers.get("retry-after"),
    )

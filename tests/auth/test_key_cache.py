"""Cached keys: a revocation made through one API process reaches every other at once."""

import time

import httpx
import pytest

from app.auth.cache import KeyCache
from app.state import app_state
from tests.support.live import live_api

pytestmark = pytest.mark.slow


async def test_revocation_reaches_another_process(settings, tenant):
    created = await tenant.create_key("service")
    headers = {"Authorization": f"Bearer {created['secret']}", "X-Agent-Id": "a"}
    with live_api(settings) as base:
        async with httpx.AsyncClient(base_url=base, headers=headers) as other:
            for _ in range(3):  # resolved once, then served from that process's cache
                assert (await other.get("/v1/sessions")).status_code == 200
            r = await tenant.admin.delete(
                f"/v1/api-keys/{created['id']}", params={"tenant_id": tenant.id}
            )
            assert r.status_code == 204
            deadline = time.monotonic() + 2
            status = 200
            while status == 200 and time.monotonic() < deadline:
                status = (await other.get("/v1/sessions")).status_code
            assert status == 401


async def test_no_cache_without_subscription(app, tenant):
    cache = app_state(app).parts[KeyCache]
    assert cache.active
    created = await tenant.create_key("service")
    c = tenant.client_for(created["secret"], {"X-Agent-Id": "a"})
    assert (await c.get("/v1/sessions")).status_code == 200
    from app.auth.keys import hash_key

    assert cache.get(hash_key(created["secret"])) is not None
    cache._subscribed.clear()  # as while Redis is unreachable
    try:
        assert cache.get(hash_key(created["secret"])) is None
    finally:
        cache._subscribed.set()

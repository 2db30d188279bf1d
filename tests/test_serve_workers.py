"""`loom-memory serve --workers 2`: two API processes behind one port, under concurrent
appends and context builds, answer every request (no dropped connection, no error) and
keep each session's seqs gap-free."""

import asyncio
import uuid

import httpx
import psutil
import pytest

from tests.support.live import live_api

pytestmark = pytest.mark.slow


def _api_processes(port: int) -> set[int]:
    """Pids of the processes serving the port (the supervisor's children)."""
    out = set()
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if f"--port {port}" in cmd and "app.launcher.cli" in cmd:
            out |= {c.pid for c in p.children() if c.is_running()}
    return out


async def test_two_api_processes_serve_concurrent_appends_and_contexts(settings):
    with live_api(settings, workers=2) as base:
        port = int(base.rsplit(":", 1)[1])
        admin = {"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"}
        async with httpx.AsyncClient(
            base_url=base, timeout=30, limits=httpx.Limits(max_connections=32)
        ) as c:
            # both processes come up (the first answers /healthz before the second)
            for _ in range(100):
                if len(_api_processes(port)) >= 2:
                    break
                await asyncio.sleep(0.2)
            assert len(_api_processes(port)) >= 2
            tenant = (
                await c.post(
                    "/v1/tenants", json={"name": f"workers-{uuid.uuid4().hex[:8]}"}, headers=admin
                )
            ).json()
            key = (
                await c.post(
                    "/v1/api-keys",
                    json={"tenant_id": tenant["id"], "role": "service"},
                    headers=admin,
                )
            ).json()
            h = {"Authorization": f"Bearer {key['secret']}", "X-Agent-Id": "w"}
            sids = [
                (await c.post("/v1/sessions", json={}, headers=h)).json()["id"] for _ in range(8)
            ]
            sem = asyncio.Semaphore(32)

            async def one(i: int) -> int:
                sid = sids[i % len(sids)]
                async with sem:
                    if i % 2:
                        r = await c.post(
                            f"/v1/sessions/{sid}/context", json={"format": "openai"}, headers=h
                        )
                    else:
                        r = await c.post(
                            f"/v1/sessions/{sid}/messages",
                            headers=h,
                            json={"messages": [{"role": "user", "content": f"message {i}"}]},
                        )
                    return r.status_code

            codes = await asyncio.gather(*(one(i) for i in range(400)))
            assert all(200 <= s < 300 for s in codes), sorted(set(codes))
            for n, sid in enumerate(sids):
                appended = sum(1 for i in range(0, 400, 2) if i % len(sids) == n)
                items = (
                    await c.get(f"/v1/sessions/{sid}/messages", headers=h, params={"limit": 200})
                ).json()["items"]
                assert [m["seq"] for m in items] == list(range(1, appended + 1))

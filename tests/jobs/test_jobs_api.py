"""GET /v1/jobs: a tenant's compression jobs and fact extractions, filtered and paged, the
queue's depth and the worker's liveness; agent keys see only their own agent's jobs."""

import asyncio
from typing import Any

import httpx
from arq.worker import Worker

from app.core.config import Settings
from app.core.redis import arq_settings
from tests.jobs.support import append, drain_queue, exchange, new_session
from workers.settings import compression_functions, shutdown, startup


async def _jobs(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    r = await client.get("/v1/jobs", params=params)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_jobs_list_filters_pages_and_shows_the_queue(
    client: httpx.AsyncClient, tenant: Any, settings: Settings
) -> None:
    await drain_queue(settings)
    compressing = await new_session(client)
    for n in range(3):
        await append(client, compressing, exchange(n))
    assert (await client.post(f"/v1/sessions/{compressing}/memory/compress")).status_code == 202
    r = await client.post("/v1/sessions", json={"config": {"facts": {"enabled": True}}})
    extracting = r.json()["id"]
    await append(client, extracting, exchange(0))
    r = await client.post(f"/v1/sessions/{extracting}/memory/extract", params={"wait": "true"})
    assert r.status_code == 200, r.text  # no LLM: recorded as skipped

    got = await _jobs(client)
    mine = {(j["kind"], j["session_id"]): j for j in got["items"]}
    assert mine[("compression", compressing)]["status"] == "pending"
    assert mine[("compression", compressing)]["agent_id"] == "agent-1"
    assert mine[("facts", extracting)]["status"] == "skipped"
    assert got["queue"]["depth"] >= 1 and isinstance(got["queue"]["worker_alive"], bool)
    stamps = [j["updated_at"] for j in got["items"]]
    assert stamps == sorted(stamps, reverse=True)

    assert {j["kind"] for j in (await _jobs(client, kind="facts"))["items"]} == {"facts"}
    assert [j["session_id"] for j in (await _jobs(client, status="pending"))["items"]] == [
        compressing
    ]

    first = await _jobs(client, limit=1)
    assert len(first["items"]) == 1 and first["next_cursor"]
    second = await _jobs(client, limit=1, cursor=first["next_cursor"])
    assert second["items"] and second["items"][0] != first["items"][0]
    bad = await client.get("/v1/jobs", params={"cursor": "nonsense"})
    assert bad.status_code in (400, 422), bad.text
    assert (await client.get("/v1/jobs", params={"status": "lost"})).status_code == 422

    # a worker runs the queued job and reports itself while it runs; gone once it stops
    worker = Worker(
        functions=compression_functions(settings),
        redis_settings=arq_settings(settings.redis_url or ""),
        queue_name=settings.queue_name,
        poll_delay=0.05,
        health_check_interval=10,
        ctx={"settings": settings},
        on_startup=startup,
        on_shutdown=shutdown,
        handle_signals=False,
    )
    task = asyncio.create_task(worker.main())
    try:
        for _ in range(100):
            after = await _jobs(client, kind="compression")
            if after["queue"]["worker_alive"] and after["items"][0]["status"] == "succeeded":
                break
            await asyncio.sleep(0.1)
        assert after["items"][0]["status"] == "succeeded", after
        assert after["queue"]["worker_alive"] is True
        assert "j_complete=" in after["queue"]["worker_report"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await worker.close()
    assert (await _jobs(client))["queue"]["worker_alive"] is False

    # agent keys: their own agent's jobs, no queue; another agent's: nothing
    own = await tenant.new_client(role="agent", agent_id="agent-1")
    other = await tenant.new_client(role="agent", agent_id="agent-2")
    seen = await _jobs(own)
    assert {j["session_id"] for j in seen["items"]} == {compressing, extracting}
    assert seen["queue"] is None
    assert (await _jobs(other))["items"] == []
    assert (await other.get("/v1/jobs", params={"agent_id": "agent-1"})).status_code == 403


async def test_jobs_of_another_tenant_are_not_listed(
    client: httpx.AsyncClient, admin_client: httpx.AsyncClient, app: Any
) -> None:
    sid = await new_session(client)
    await append(client, sid, exchange(0))
    assert (await client.post(f"/v1/sessions/{sid}/memory/compress")).status_code == 202
    r = await admin_client.post("/v1/tenants", json={"name": f"jobs-{sid[:8]}"})
    tid = r.json()["id"]
    key = (
        await admin_client.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
    ).json()["secret"]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://t",
        headers={"Authorization": f"Bearer {key}"},
    ) as stranger:
        assert (await _jobs(stranger))["items"] == []

"""Watch and memory-tier invalidation across two API processes sharing PostgreSQL and Redis.

Process A is the test's in-process app; process B is a real uvicorn subprocess on a free
port. Writes go through A, watchers and cached reads are on B.
"""

import asyncio
import contextlib
import json
import time
from typing import Any

import httpx
import pytest

from tests.support.live import live_api

pytestmark = pytest.mark.slow
SM = "/v1/shared-memory"


@pytest.fixture(scope="module")
def second_api(settings):
    with live_api(settings, LOOM_LOG_LEVEL="warning") as base:
        yield base


class SSE:
    """Reads an SSE stream in the background into a list of (event, data)."""

    def __init__(self, client: httpx.AsyncClient, url: str, params: dict) -> None:
        self.events: list[tuple[str, Any]] = []
        self.ready = asyncio.Event()
        self._task = asyncio.create_task(self._run(client, url, params))

    async def _run(self, client, url, params) -> None:
        async with client.stream("GET", url, params=params) as resp:
            assert resp.status_code == 200, await resp.aread()
            name, data = None, None
            async for line in resp.aiter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                elif line == "" and name:
                    self.events.append((name, data))
                    if name == "ready":
                        self.ready.set()
                    name, data = None, None

    def of(self, *names: str) -> list[dict]:
        return [d for n, d in self.events if n in names]

    async def wait_for(self, pred, within: float = 10) -> None:
        deadline = asyncio.get_running_loop().time() + within
        while not pred(self):
            if self._task.done():
                self._task.result()
                raise AssertionError(f"stream ended: {self.events}")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out; events so far: {self.events}")
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


async def test_watch_across_processes_with_agent_filtering(tenant, second_api):
    k1 = (await tenant.create_key("agent", "player1"))["secret"]
    k2 = (await tenant.create_key("agent", "player2"))["secret"]
    a_p1, a_p2 = tenant.client_for(k1), tenant.client_for(k2)
    a_service = tenant.client_for(tenant.service_key)
    await a_p1.put(f"{SM}/agent/notes", json={"value": "before the watch"})
    await a_p2.put(f"{SM}/agent/notes", json={"value": "player2 before"})

    auth = {"Authorization": f"Bearer {k1}"}
    async with (
        httpx.AsyncClient(base_url=second_api, headers=auth, timeout=30) as b_p1,
        httpx.AsyncClient(
            base_url=second_api,
            timeout=30,
            headers={"Authorization": f"Bearer {tenant.service_key}"},
        ) as b_service,
    ):
        mine = SSE(
            b_p1, f"{SM}/agent/watch", {"include_initial": "true", "heartbeat_seconds": "0.5"}
        )
        party = SSE(b_service, f"{SM}/workflow/watch", {"scope_id": "camp", "prefix": "party/"})
        try:
            await asyncio.wait_for(asyncio.gather(mine.ready.wait(), party.ready.wait()), 15)
            await a_p2.put(f"{SM}/agent/character_sheet", json={"value": "Luna"})
            await a_p1.put(f"{SM}/agent/character_sheet", json={"value": "Eldrin"})
            await a_service.put(
                f"{SM}/workflow/other", params={"scope_id": "camp"}, json={"value": 0}
            )
            await a_service.put(
                f"{SM}/workflow/party/gold", params={"scope_id": "camp"}, json={"value": 120}
            )
            await a_service.delete(f"{SM}/workflow/party/gold", params={"scope_id": "camp"})

            await mine.wait_for(lambda s: any(d["key"] == "character_sheet" for d in s.of("put")))
            await party.wait_for(lambda s: s.of("delete"))
            await mine.wait_for(lambda s: s.of("heartbeat"))
        finally:
            await mine.close()
            await party.close()

    initial = [d for d in mine.of("put") if d["initial"]]
    assert [d["key"] for d in initial] == ["notes"]
    live = [d for d in mine.of("put") if not d["initial"]]
    assert [(d["key"], d["value"], d["scope_id"]) for d in live] == [
        ("character_sheet", "Eldrin", "player1")
    ]
    assert all(d["scope_id"] == "player1" for d in mine.of("put", "delete"))
    assert "Luna" not in json.dumps(mine.events) and "player2" not in json.dumps(mine.events)
    assert [(d["op"], d["key"]) for d in party.of("put", "delete")] == [
        ("put", "party/gold"),
        ("delete", "party/gold"),
    ]
    assert party.of("put")[0]["value"] == 120


async def test_memory_tier_invalidated_across_processes(tenant, second_api):
    a = tenant.client_for(tenant.service_key)
    async with httpx.AsyncClient(
        base_url=second_api, timeout=30, headers={"Authorization": f"Bearer {tenant.service_key}"}
    ) as b:
        await a.put(f"{SM}/global/config", json={"value": "v1"})
        first = await b.get(f"{SM}/global/config")
        again = await b.get(f"{SM}/global/config")
        assert first.json()["value"] == again.json()["value"] == "v1"
        assert again.headers["x-loom-storage-location"] == "memory"  # B cached it
        await a.put(f"{SM}/global/config", json={"value": "v2"})
        deadline = time.monotonic() + 5
        while (await b.get(f"{SM}/global/config")).json()["value"] != "v2":
            assert time.monotonic() < deadline, "process B kept serving a stale value"
            await asyncio.sleep(0.05)
        await a.delete(f"{SM}/global/config")
        deadline = time.monotonic() + 5
        while (await b.get(f"{SM}/global/config")).status_code != 404:
            assert time.monotonic() < deadline, "process B served a deleted value"
            await asyncio.sleep(0.05)

"""/metrics: requests by route template and status, the store gauges, and one scrape of any
API process of `serve` showing every process it runs (the worker's job counters too)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.core.config import Settings
from app.core.metrics_dir import ENV, ServeMetricsDir
from tests.jobs.support import SMALL, exchange
from tests.support import api
from tests.support.live import live_api

SESSION = "/v1/sessions/{session_id}"


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called `name` whose labels include `labels`."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += sample.value
    return total


async def test_requests_are_counted_and_timed_by_route_template_and_status(
        client: httpx.AsyncClient) -> None:
    sid = await api.new_session(client)
    before = (await client.get("/metrics")).text
    for _ in range(3):
        assert (await client.get(f"/v1/sessions/{sid}")).status_code == 200
    assert (await client.get(f"/v1/sessions/{uuid.uuid4()}")).status_code == 404
    assert (await client.get(f"/no/such/{uuid.uuid4()}")).status_code == 404
    after = (await client.get("/metrics")).text

    def grew(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert grew("http_requests_total", handler=SESSION, method="GET", status="200") == 3
    assert grew("http_requests_total", handler=SESSION, method="GET", status="404") == 1
    # a path no route matches is one series, not one per path
    assert grew("http_requests_total", handler="none", method="GET", status="404") == 1
    assert grew("http_request_duration_seconds_count", handler=SESSION, method="GET",
                status="200") == 3
    assert grew("http_request_duration_seconds_bucket", handler=SESSION, method="GET",
                status="200", le="+Inf") == 3
    assert grew("http_request_duration_seconds_bucket", handler=SESSION, method="GET",
                status="200", le="30.0") == 3
    assert sid not in after and "/no/such" not in after
    # scrapes are not counted
    assert metric(after, "http_requests_total", handler="/metrics") == 0


async def test_store_gauges_show_the_pools_and_redis(
        client: httpx.AsyncClient, app: Any, settings: Settings,
        monkeypatch: pytest.MonkeyPatch) -> None:
    await api.new_session(client)  # the auth lookup uses the asyncpg pool
    text = (await client.get("/metrics")).text
    assert metric(text, "loom_db_pool_max_connections", pool="asyncpg") == settings.db_pool_size
    opened = metric(text, "loom_db_pool_open_connections", pool="asyncpg")
    assert opened >= 1
    assert (metric(text, "loom_db_pool_idle_connections", pool="asyncpg")
            + metric(text, "loom_db_pool_in_use_connections", pool="asyncpg")) == opened
    assert 'loom_db_pool_in_use_connections{pool="sqlalchemy"}' in text
    assert metric(text, "loom_db_pool_max_connections", pool="sqlalchemy") > 0
    assert metric(text, "loom_redis_up") == 1

    async def no_answer() -> None:
        raise ConnectionError("redis is gone")

    monkeypatch.setattr(app.state.loom.redis, "ping", no_answer)
    assert metric((await client.get("/metrics")).text, "loom_redis_up") == 0


def test_serve_makes_a_fresh_directory_or_empties_the_given_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "")  # restored (unset) after the test
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    killed = tmp_path / f"loom-metrics-{gone.pid}"  # a `serve` that was killed
    killed.mkdir()
    (killed / "counter_1.db").write_bytes(b"")
    temporary = ServeMetricsDir(None)
    assert temporary.path == tmp_path / f"loom-metrics-{os.getpid()}"
    assert temporary.path.is_dir() and os.environ[ENV] == str(temporary.path.resolve())
    assert not killed.exists()
    temporary.remove()
    assert not temporary.path.exists()

    given = tmp_path / "metrics"
    given.mkdir()
    (given / "counter_4242.db").write_bytes(b"an earlier run")
    (given / "README").write_text("not ours")
    kept = ServeMetricsDir(given)
    assert os.environ[ENV] == str(given.resolve())
    assert [p.name for p in given.iterdir()] == ["README"]
    kept.remove()  # the operator's directory stays
    assert given.is_dir()


async def _until(check: Callable[[], Awaitable[bool]], seconds: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.3)


@pytest.mark.slow
async def test_one_scrape_shows_every_api_process_and_the_worker(
        settings: Settings, tmp_path: Path) -> None:
    prom = tmp_path / "prom"
    prom.mkdir()
    (prom / "counter_999999.db").write_bytes(b"left by an earlier run")
    pool = settings.db_pool_size
    with live_api(settings, workers=2, worker=True, PROMETHEUS_MULTIPROC_DIR=str(prom),
                  LOOM_QUEUE_NAME=f"loom:test:metrics:{uuid.uuid4().hex[:12]}",
                  LOOM_LLM_PROVIDER="none", LOOM_LOG_LEVEL="warning") as base:
        assert not (prom / "counter_999999.db").exists()  # emptied on start
        # a new connection per request, so either API process may answer
        close = {"Connection": "close"}
        async with httpx.AsyncClient(base_url=base, timeout=30, headers=close) as c:
            async def scrape() -> str:
                resp = await c.get("/metrics")
                assert resp.status_code == 200
                return resp.text

            async def both_pools() -> bool:
                # each API process sets its own gauges; the scrape sums the live ones
                text = await scrape()
                return metric(text, "loom_db_pool_max_connections", pool="asyncpg") == 2 * pool

            await _until(both_pools, 60, "both API processes' pool gauges")

            for _ in range(20):
                assert (await c.get("/readyz")).status_code == 200
            for _ in range(4):
                assert metric(await scrape(), "http_requests_total", handler="/readyz") == 20

            # a compression job, run by the worker process
            assert settings.admin_key is not None
            admin = {"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"}
            tenant = (await c.post("/v1/tenants", json={"name": "metrics"}, headers=admin)).json()
            key = (await c.post("/v1/api-keys", headers=admin,
                                json={"tenant_id": tenant["id"], "role": "service"})).json()
            h = {"Authorization": f"Bearer {key['secret']}", "X-Agent-Id": "m"}
            sid = (await c.post("/v1/sessions", json={"config": SMALL}, headers=h)).json()["id"]
            for n in range(8):
                resp = await c.post(f"/v1/sessions/{sid}/messages", headers=h,
                                    json={"messages": exchange(n)})
                assert resp.status_code == 201, resp.text

            async def job_ran() -> bool:
                text = await scrape()
                return (metric(text, "loom_compression_jobs_run_total") >= 1
                        and metric(text, "loom_summaries_written_total") >= 1)

            await _until(job_ran, 60, "the worker's job counters in the API's /metrics")

            # an API process that dies stops counting in the pool sums; its restart counts
            api_pids = [int(p.stem.rsplit("_", 1)[1]) for p in prom.glob("gauge_livesum_*.db")]
            assert len(api_pids) == 2
            os.kill(api_pids[0], signal.SIGKILL)

            async def dead_forgotten() -> bool:
                return not list(prom.glob(f"gauge_livesum_{api_pids[0]}.db"))

            await _until(dead_forgotten, 30, "the dead process's gauges to be dropped")
            await _until(both_pools, 60, "the restarted API process's pool gauges")
            # counters of the dead process are kept
            assert metric(await scrape(), "http_requests_total", handler="/readyz") == 20

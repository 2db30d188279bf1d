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
    client: httpx.AsyncClient,
) -> None:
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
    assert (
        grew("http_request_duration_seconds_count", handler=SESSION, method="GET", status="200")
        == 3
    )
    assert (
        grew(
            "http_request_duration_seconds_bucket",
            handler=SESSION,
            method="GET",
            status="200",
            le="+Inf",
        )
        == 3
    )
    assert (
        grew(
            "http_request_duration_seconds_bucket",
            handler=SESSION,
            method="GET",
            status="200",
            le="30.0",
        )
        == 3
    )
    assert sid not in after and "/no/such" not in after
    # scrapes are not counted
    assert metric(after, "http_requests_total", handler="/metrics") == 0


# What prometheus-fastapi-instrumentator exported (its `requests()` and `latency()` with
# our buckets), before `app.core.metrics.RequestMetrics` replaced it: dashboards and alerts
# read these, so they must not change.
HTTP_FAMILIES = {
    "http_requests": (
        "counter",
        "Total number of requests by method, status and handler.",
        ("handler", "method", "status"),
    ),
    "http_request_duration_seconds": (
        "histogram",
        "Duration of HTTP requests in seconds",
        ("handler", "method", "status"),
    ),
}
HTTP_BUCKETS = (
    "0.001",
    "0.0025",
    "0.005",
    "0.01",
    "0.025",
    "0.05",
    "0.1",
    "0.25",
    "0.5",
    "1.0",
    "2.5",
    "5.0",
    "10.0",
    "30.0",
    "+Inf",
)


async def test_the_request_metrics_keep_their_names_help_labels_and_buckets(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.get("/healthz")).status_code == 200
    text = (await client.get("/metrics")).text
    families = {
        f.name: f
        for f in text_string_to_metric_families(text)
        if f.name.startswith("http_") and not f.name.endswith("_created")
    }
    assert {name: (f.type, f.documentation) for name, f in families.items()} == {
        name: (kind, doc) for name, (kind, doc, _) in HTTP_FAMILIES.items()
    }
    for name, (_, _, labels) in HTTP_FAMILIES.items():
        for sample in families[name].samples:
            assert tuple(k for k in sample.labels if k != "le") == labels, sample
    assert (
        tuple(
            s.labels["le"]
            for s in families["http_request_duration_seconds"].samples
            if s.name.endswith("_bucket")
            and s.labels["handler"] == "/healthz"
            and s.labels["status"] == "200"
        )
        == HTTP_BUCKETS
    )
    assert "http_requests_created" in text  # prometheus_client's usual series


async def test_the_handler_label_is_the_template_the_instrumentator_resolved(
    client: httpx.AsyncClient, app: Any, settings: Settings
) -> None:
    """Routes of included routers (with their prefix), app routes, a 405 (path matched,
    method not), a path of a `{key:path}` route, a request refused before routing (413),
    the console's static files and a path no route matches."""
    sid = uuid.uuid4()
    big = b"x" * (settings.max_request_bytes + 1)
    cases = [
        ("GET", f"/v1/sessions/{sid}", None, "/v1/sessions/{session_id}", "404"),
        ("GET", "/healthz", None, "/healthz", "200"),
        ("PUT", f"/v1/sessions/{sid}/context", None, "/v1/sessions/{session_id}/context", "405"),
        (
            "GET",
            "/v1/shared-memory/global/a/b",
            None,
            "/v1/shared-memory/{namespace}/{key:path}",
            "404",
        ),
        ("POST", f"/v1/sessions/{sid}/messages", big, "/v1/sessions/{session_id}/messages", "413"),
        ("GET", "/console/static/console.css", None, "none", "200"),
        ("GET", "/no/such/path", None, "none", "404"),
    ]
    before = (await client.get("/metrics")).text
    for method, path, body, _, status in cases:
        resp = await client.request(
            method, path, content=body, headers={"Content-Type": "application/json"}
        )
        assert str(resp.status_code) == status, (path, resp.status_code)
    after = (await client.get("/metrics")).text
    for method, _, _, handler, status in cases:
        grew = metric(
            after, "http_requests_total", handler=handler, method=method, status=status
        ) - metric(before, "http_requests_total", handler=handler, method=method, status=status)
        assert grew >= 1, (method, handler, status)


async def test_store_gauges_show_the_pools_and_redis(
    client: httpx.AsyncClient, app: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    await api.new_session(client)  # the auth lookup uses the asyncpg pool
    text = (await client.get("/metrics")).text
    assert metric(text, "loom_db_pool_max_connections", pool="asyncpg") == settings.db_pool_size
    opened = metric(text, "loom_db_pool_open_connections", pool="asyncpg")
    assert opened >= 1
    assert (
        metric(text, "loom_db_pool_idle_connections", pool="asyncpg")
        + metric(text, "loom_db_pool_in_use_connections", pool="asyncpg")
    ) == opened
    assert 'loom_db_pool_in_use_connections{pool="routes"}' in text
    assert metric(text, "loom_db_pool_max_connections", pool="routes") > 0
    assert metric(text, "loom_redis_up") == 1

    async def no_answer() -> None:
        raise ConnectionError("redis is gone")

    monkeypatch.setattr(app.state.loom.redis, "ping", no_answer)
    assert metric((await client.get("/metrics")).text, "loom_redis_up") == 0


def test_serve_makes_a_fresh_directory_or_empties_the_given_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    settings: Settings, tmp_path: Path
) -> None:
    prom = tmp_path / "prom"
    prom.mkdir()
    (prom / "counter_999999.db").write_bytes(b"left by an earlier run")
    pool = settings.db_pool_size
    with live_api(
        settings,
        workers=2,
        worker=True,
        PROMETHEUS_MULTIPROC_DIR=str(prom),
        LOOM_QUEUE_NAME=f"loom:test:metrics:{uuid.uuid4().hex[:12]}",
        LOOM_LLM_PROVIDER="none",
        LOOM_LOG_LEVEL="warning",
    ) as base:
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
            key = (
                await c.post(
                    "/v1/api-keys",
                    headers=admin,
                    json={"tenant_id": tenant["id"], "role": "service"},
                )
            ).json()
            h = {"Authorization": f"Bearer {key['secret']}", "X-Agent-Id": "m"}
            sid = (await c.post("/v1/sessions", json={"config": SMALL}, headers=h)).json()["id"]
            for n in range(8):
                resp = await c.post(
                    f"/v1/sessions/{sid}/messages", headers=h, json={"messages": exchange(n)}
                )
                assert resp.status_code == 201, resp.text

            async def job_ran() -> bool:
                text = await scrape()
                return (
                    metric(text, "loom_compression_jobs_run_total") >= 1
                    and metric(text, "loom_summaries_written_total") >= 1
                )

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

"""Prometheus metrics of every process of a deployment, served by any API process.

HTTP requests are counted and timed by `RequestMetrics`, an ASGI middleware:
`http_requests_total` and the histogram `http_request_duration_seconds`, labelled with
the route template (`handler`; `none` when no route matched), `method` and `status`
(the names, help texts and labels prometheus-fastapi-instrumentator gave them, which this
middleware replaced: it matched the whole route table again on every request, 0.2-0.4 ms;
the middleware reads the route the router matched from the ASGI scope instead).

With `PROMETHEUS_MULTIPROC_DIR` set, prometheus_client keeps every process's values in
files there, and `/metrics` (and a worker's `LOOM_WORKER_METRICS_PORT`) serves them all
merged by the standard multi-process collector: one scrape of any API process shows every
API process and every worker of the directory (the jobs' counters too). The variable must
be in the environment before a process imports prometheus_client (`app.core.metrics_dir`:
`loom-memory serve` sets it for itself and its children). Without it, each process serves
only its own values.
"""

from __future__ import annotations

import os
import re
from time import perf_counter
from typing import Any

from fastapi import FastAPI
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_fastapi_instrumentator.routing import get_route_name
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.metrics_dir import ENV, alive
from app.core.request_context import log_access

# Request latencies: the hot paths answer in about a millisecond, searches with a rerank
# in seconds.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
LABELS = ("handler", "method", "status")
# once per process (each app of a process, tests build several, records into them)
REQUESTS = Counter(
    "http_requests_total", "Total number of requests by method, status and handler.", LABELS
)
LATENCY = Histogram(
    "http_request_duration_seconds",
    "Duration of HTTP requests in seconds",
    LABELS,
    buckets=(*LATENCY_BUCKETS, float("inf")),
)
EXCLUDED = frozenset({"/metrics"})  # scrapes are not counted
_LIVE_GAUGE_FILE = re.compile(r"gauge_live\w+?_(\d+)\.db")


def multiprocess_dir() -> str | None:
    return os.environ.get(ENV) or None


def route_template(scope: Scope) -> str:
    """The template of the route that answered (`/v1/sessions/{session_id}`), `none` when
    no route matched. The router leaves the route it matched (fully, or by path only: 405)
    in the scope: a route of an included router as FastAPI's effective route (its path
    with the router's prefix; `scope["route"]` is the router's own, without it), any other
    as `scope["route"]`. A request answered before routing (e.g. refused by the request
    limits) is matched here, once, the way the router would."""
    context = scope.get("fastapi", {}).get("effective_route_context")
    route = getattr(context, "starlette_route", None) or context or scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str) and path:
        return path
    return get_route_name(HTTPConnection(scope), should_include_root_path=False) or "none"


class RequestMetrics:
    """Count and time every HTTP request by route template, method and status; with
    `access_log`, write each one's access line (`app.core.request_context.log_access`)."""

    def __init__(self, app: ASGIApp, access_log: bool = False) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = perf_counter()
        status = 500  # when the app raises before it answers

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            duration = max(perf_counter() - start, 0.0)
            handler = route_template(scope)
            if handler not in EXCLUDED:
                labels = (handler, scope["method"], str(int(status)))
                REQUESTS.labels(*labels).inc()
                LATENCY.labels(*labels).observe(duration)
                if self.access_log:
                    log_access(scope["method"], handler, int(status), duration)


def instrument(app: FastAPI, access_log: bool = False) -> None:
    """Count and time every request (a middleware; scrapes of /metrics are left out), and
    with `access_log` write each one's access line (`app.core.request_context`)."""
    app.add_middleware(RequestMetrics, access_log=access_log)


def registry() -> Any:
    """The registry to serve: every process's values with a multi-process directory (read
    from its files on each collection), this process's without."""
    if multiprocess_dir() is None:
        return REGISTRY
    merged = CollectorRegistry()
    multiprocess.MultiProcessCollector(merged)
    return merged


def exposition() -> bytes:
    """Every metric in the Prometheus text format."""
    return bytes(generate_latest(registry()))


def sweep_dead_processes() -> None:
    """Forget the live gauges (connection pools) of processes that are gone: a crashed API
    process's files would keep counting in the sums until the next start."""
    path = multiprocess_dir()
    if path is None:
        return
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        m = _LIVE_GAUGE_FILE.fullmatch(name)
        if m is None:
            continue
        pid = int(m.group(1))
        if not alive(pid):
            multiprocess.mark_process_dead(pid, path)

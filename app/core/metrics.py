"""Prometheus metrics of every process of a deployment, served by any API process.

HTTP requests are counted and timed by the app's middleware (`app.core.edge`, `Series`):
`http_requests_total` and the histogram `http_request_duration_seconds`, labelled with
the route template (`handler`; `none` when no route matched), `method` and `status`
(the names, help texts and labels prometheus-fastapi-instrumentator gave them, which this
replaced: it matched the whole route table again on every request, 0.2-0.4 ms; the route
the router matched is read from the ASGI scope instead).

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
from typing import Any

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
from starlette.types import Scope

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


class Series:
    """Counts and times HTTP requests by route template, method and status (scrapes of
    /metrics left out); with `access_log`, writes each one's access line
    (`app.core.request_context.log_access`). Keeps the labelled series it has recorded
    into, so a request does not look its labels up in the metric's locked table again (a
    series per route, method and status: as many as Prometheus holds anyway)."""

    def __init__(self, access_log: bool = False) -> None:
        self.access_log = access_log
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def record(self, scope: Scope, route: str | None, status: int, duration: float) -> None:
        """One request: `route` is its template when known, else read from the scope."""
        handler = route or route_template(scope)
        if handler in EXCLUDED:
            return
        method, status = scope["method"], int(status)
        key = (handler, method, status)
        children = self._children.get(key)
        if children is None:
            labels = (handler, method, str(status))
            children = self._children[key] = (
                REQUESTS.labels(*labels),
                LATENCY.labels(*labels),
            )
        duration = max(duration, 0.0)
        children[0].inc()
        children[1].observe(duration)
        if self.access_log:
            log_access(method, handler, status, duration)


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

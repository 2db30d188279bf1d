"""Prometheus metrics of every process of a deployment, served by any API process.

HTTP requests are counted and timed by prometheus-fastapi-instrumentator:
`http_requests_total` and the histogram `http_request_duration_seconds`, labelled with
the route template (`handler`; `none` when no route matched), `method` and `status`.

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

from fastapi import FastAPI
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_fastapi_instrumentator import Instrumentator
from prometheus_fastapi_instrumentator import metrics as http_metrics

from app.core.metrics_dir import ENV, alive
from app.core.request_context import log_access

# Request latencies: the hot paths answer in about a millisecond, searches with a rerank
# in seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)
# the metrics exist once per process (each app of a process, tests build several, records
# into them; the instrumentator's own would be created per app and clash in the registry)
_INSTRUMENTATIONS = [
    http_metrics.requests(),
    http_metrics.latency(buckets=LATENCY_BUCKETS),
]
_LIVE_GAUGE_FILE = re.compile(r"gauge_live\w+?_(\d+)\.db")


def multiprocess_dir() -> str | None:
    return os.environ.get(ENV) or None


def instrument(app: FastAPI, access_log: bool = False) -> None:
    """Count and time every request (a middleware; scrapes of /metrics are left out), and
    with `access_log` write each one's access line (`app.core.request_context`)."""
    instrumentator = Instrumentator(should_group_status_codes=False,
                                    excluded_handlers=["^/metrics$"])
    instrumentator.add(*_INSTRUMENTATIONS)
    if access_log:
        instrumentator.add(log_access)
    instrumentator.instrument(app)


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

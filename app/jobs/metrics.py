"""Prometheus counters of background compression.

They are counted in the worker processes that run the jobs. With a multi-process directory
(`PROMETHEUS_MULTIPROC_DIR`; `serve` sets one for its API processes and its worker) any API
process's `/metrics` shows them; a worker that shares no directory with an API serves them
on `LOOM_WORKER_METRICS_PORT` (see app/core/metrics.py).
"""

from prometheus_client import Counter

JOBS_ENQUEUED = Counter(
    "loom_compression_jobs_enqueued",
    "Compression jobs handed to the queue, by trigger.",
    ["trigger"],
)
JOBS_RUN = Counter(
    "loom_compression_jobs_run", "Compression jobs that finished (successfully or not)."
)
JOBS_FAILED = Counter(
    "loom_compression_jobs_failed", "Compression jobs that gave up after their last try."
)
JOBS_RETRIED = Counter(
    "loom_compression_jobs_retried", "Compression job tries that were rescheduled with backoff."
)
SUMMARIES = Counter("loom_summaries_written", "Summaries written to L2, by method.", ["method"])
TOKENS_SAVED = Counter(
    "loom_compression_tokens_saved",
    "Context tokens removed by compression: covered messages minus "
    "the summaries that replaced them.",
)

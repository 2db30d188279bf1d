"""Prometheus metrics of shared memory (default registry, served at /metrics)."""

from prometheus_client import Counter

INTEGRITY_ERRORS = Counter(
    "loom_shared_memory_integrity_errors",
    "Reads refused because stored bytes did not match their SHA-256.",
)
OFFLOADED_TOOL_RESULTS = Counter(
    "loom_shared_memory_offloaded_tool_results",
    "Large tool results stored as shared-memory data and replaced by a data reference.",
)
EXPIRED_DELETED = Counter(
    "loom_shared_memory_expired_deleted",
    "Expired, unreferenced entries deleted by the cleanup job.",
)

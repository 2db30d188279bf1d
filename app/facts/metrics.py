"""Prometheus counters of fact extraction (counted in the process that runs the job: the
worker, or the API for `?wait=true`; see app/jobs/metrics.py for how they are served)."""

from prometheus_client import Counter

LLM_CALLS = Counter("loom_facts_llm_calls", "LLM calls made by fact extraction, by step.", ["step"])
LLM_TOKENS = Counter(
    "loom_facts_llm_tokens",
    "LLM tokens of fact extraction, by step and direction (input/output).",
    ["step", "direction"],
)
JOBS_RUN = Counter(
    "loom_facts_jobs_run",
    "Fact extraction jobs that finished, by outcome (succeeded, failed, skipped).",
    ["outcome"],
)
JOBS_SKIPPED = Counter(
    "loom_facts_jobs_skipped", "Fact extractions skipped, by reason (no_llm, disabled).", ["reason"]
)
JOBS_RETRIED = Counter("loom_facts_jobs_retried", "Fact extraction tries rescheduled with backoff.")
BAD_OUTPUT = Counter("loom_facts_bad_output", "Model answers rejected (nothing written).")
OPERATIONS = Counter("loom_facts_operations", "Fact changes applied, by operation.", ["op"])
MESSAGES = Counter("loom_facts_messages_read", "Messages read by fact extraction.")
DROPPED = Counter(
    "loom_facts_dropped_candidates",
    "Candidate facts dropped from a model answer as irreparable (the rest were kept).",
)

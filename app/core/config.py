"""Settings: one `Settings` object, read from the environment (and `.env`)."""

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

WORKER_CONNECTIONS = 12  # an arq worker's pool (workers/settings.py)


def api_pool_sizes(pool: int) -> tuple[int, int]:
    """An API process's SQLAlchemy pool for an asyncpg pool of `pool` (LOOM_DB_POOL_SIZE):
    (pool_size, max_overflow). The process opens at most `pool` + both; `serve`'s
    connection budget (app/launcher/budget.py) plans with the same numbers."""
    size = max(1, pool // 2)
    return size, max(1, size // 2)


class Settings(BaseSettings):
    """Every setting the service reads. Each is documented in `.env.example`."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    # Stores. Unset = the embedded default starts its own (see app/launcher/embedded.py).
    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    data_dir: Path = Field(default=Path(".loom"), alias="LOOM_DATA_DIR")

    # HTTP
    host: str = Field(default="127.0.0.1", alias="LOOM_HOST")
    port: int = Field(default=8420, alias="LOOM_PORT")
    # API processes `loom-memory serve` runs (0 = one per core)
    web_workers: int = Field(default=0, ge=0, le=256, alias="LOOM_WEB_WORKERS")
    log_level: str = Field(default="info", alias="LOOM_LOG_LEVEL")
    # text: lines for a terminal; json: one object per line (app/core/logs.py), with an
    # access line per request (its id, route template, status, duration)
    log_format: Literal["text", "json"] = Field(default="text", alias="LOOM_LOG_FORMAT")
    # every process also appends its lines here, with an access line per request in text
    # mode too (the terminal gets none); `serve` on embedded stores: <data dir>/serve.log
    log_file: Path | None = Field(default=None, alias="LOOM_LOG_FILE")
    # Every process writing its Prometheus values here is served by any API process's
    # /metrics (app/core/metrics.py); `serve` uses a temporary one when unset.
    metrics_dir: Path | None = Field(default=None, alias="PROMETHEUS_MULTIPROC_DIR")
    # Connections per API process: the hot paths' asyncpg pool (auth, append, context build,
    # shared-memory reads) holds up to this many, opened on demand and kept; the SQLAlchemy
    # pool of the other routes keeps half as many and opens half again at peaks (closed per
    # request). Size it for the usual concurrency per process (at 10, 32 clients spent ~10%
    # of the CPU connecting); N processes use up to N x 1.75 x this many connections.
    db_pool_size: int = Field(default=20, ge=1, alias="LOOM_DB_POOL_SIZE")
    # `serve`'s connection budget (app/launcher/budget.py): the connections its API processes
    # may open in all (0: PostgreSQL's max_connections less its reserved slots, this reserve
    # and the worker's), and what is kept free for migrations and operators.
    db_connections: int = Field(default=0, ge=0, alias="LOOM_DB_CONNECTIONS")
    db_reserve: int = Field(default=10, ge=0, alias="LOOM_DB_RESERVE")
    # Prepared-statement caches of both pools (asyncpg's `statement_cache_size`, SQLAlchemy's
    # `prepared_statement_cache_size`). Off for a pooler that does not track protocol-level
    # prepared statements (PgBouncer before 1.21 in transaction mode): each statement is then
    # parsed on every run, and SQLAlchemy's statements get names of their own
    # (docs/scaling.md, Step 2).
    db_statement_cache: bool = Field(default=True, alias="LOOM_DB_STATEMENT_CACHE")
    # Garbage collection of an API process once it has started (app/core/heap.py): what
    # startup built is frozen out of the collector's way and young collections run less
    # often. 0 = CPython's defaults.
    gc_tune: bool = Field(default=True, alias="LOOM_GC_TUNE")
    otel: bool = Field(default=False, alias="LOOM_OTEL")
    # traces carry query texts and records (personal data) only when this is on
    otel_content: bool = Field(default=False, alias="LOOM_OTEL_CONTENT")
    # LLM cost (app/llm/usage.py): a tenant's daily budget of input + output
    # tokens (UTC days) unless an admin set its own (none: no budget), and how long a
    # process trusts what it read of a tenant's budget and spending.
    daily_token_budget: int | None = Field(default=None, ge=0, alias="LOOM_DAILY_TOKEN_BUDGET")
    usage_budget_refresh_seconds: float = Field(
        default=5.0, ge=0, alias="LOOM_USAGE_BUDGET_REFRESH_SECONDS"
    )
    # Hash-partition the tenant-owned tables by tenant_id into this many partitions when the
    # first `migrate` builds the schema (0 = plain tables); read by migration 0013 only
    # (app/core/partitions.py, docs/scaling.md).
    partitions: int = Field(default=0, ge=0, le=1024, alias="LOOM_PARTITIONS")
    # Bounded database time (app/core/db.py): a statement (server statement_timeout and a
    # client-side timeout for a server that does not answer at all), waiting for a pooled
    # connection, and opening one; past any of them the request answers 503
    # `database_unavailable` with Retry-After. 0 = no statement limit.
    # Each stage ends within 4.5 s (the client waits 0.5 s past the server's statement
    # timeout), and a request's database waits all together end by LOOM_DB_REQUEST_SECONDS
    # (app/core/deadline.py): with the database gone, the 503 comes within 5 s.
    db_statement_timeout_seconds: float = Field(
        default=4.0, ge=0, alias="LOOM_DB_STATEMENT_TIMEOUT_SECONDS"
    )
    db_pool_timeout_seconds: float = Field(default=4.5, gt=0, alias="LOOM_DB_POOL_TIMEOUT_SECONDS")
    db_connect_timeout_seconds: float = Field(
        default=4.5, gt=0, alias="LOOM_DB_CONNECT_TIMEOUT_SECONDS"
    )
    db_request_seconds: float = Field(default=4.5, ge=0, alias="LOOM_DB_REQUEST_SECONDS")
    # /readyz answers within this (each store check is cut off after it).
    ready_timeout_seconds: float = Field(default=2.0, gt=0, alias="LOOM_READY_TIMEOUT_SECONDS")

    # Auth
    admin_key: SecretStr | None = Field(default=None, alias="LOOM_ADMIN_KEY")
    rate_limit_per_second: float = Field(default=0.0, alias="LOOM_RATE_LIMIT_PER_SECOND")
    rate_limit_burst: int = Field(default=50, alias="LOOM_RATE_LIMIT_BURST")
    # Resolved keys are cached per process (revocations are broadcast on Redis; without
    # Redis nothing is cached). 0 = look every key up in PostgreSQL on every request.
    key_cache_seconds: float = Field(default=30.0, ge=0, alias="LOOM_KEY_CACHE_SECONDS")

    # Messages
    max_messages_per_request: int = Field(default=1000, alias="LOOM_MAX_MESSAGES_PER_REQUEST")
    max_request_bytes: int = Field(default=64 * 1024 * 1024, alias="LOOM_MAX_REQUEST_BYTES")
    default_text_search_config: str = Field(default="english", alias="LOOM_TEXT_SEARCH_CONFIG")

    # Input limits (app/core/limits.py, jsonlimits.py, pagination.py; knowledge filters).
    # JSON nesting of any parsed document (bodies, X-Loom-Metadata, tool-call arguments).
    max_json_depth: int = Field(default=64, ge=4, le=200, alias="LOOM_MAX_JSON_DEPTH")
    # One message (its JSON: content, tool calls, metadata); a batch is bounded by
    # LOOM_MAX_REQUEST_BYTES.
    max_message_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, alias="LOOM_MAX_MESSAGE_BYTES")
    # HMAC key of pagination cursors. Unset = derived from LOOM_ADMIN_KEY and DATABASE_URL
    # (stable across restarts and replicas of one deployment); set it to rotate cursors.
    cursor_secret: SecretStr | None = Field(default=None, alias="LOOM_CURSOR_SECRET")
    filter_max_values: int = Field(default=1000, ge=1, le=10000, alias="LOOM_FILTER_MAX_VALUES")

    migrate_on_start: bool = Field(default=True, alias="LOOM_MIGRATE_ON_START")
    # `loom-memory migrate` waits this long for DATABASE_URL's server to accept connections
    # (a container started beside a fresh PostgreSQL), then migrates; 0 = try once.
    migrate_wait_seconds: float = Field(default=60.0, ge=0, alias="LOOM_MIGRATE_WAIT_SECONDS")

    # LLM (summaries, rerank). No key = heuristic summaries and BM25-only search.
    llm_provider: Literal["anthropic", "openai", "none"] = Field(
        default="anthropic", alias="LOOM_LLM_PROVIDER"
    )
    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    summary_model: str = Field(default="claude-haiku-4-5", alias="LOOM_SUMMARY_MODEL")
    rerank_model: str | None = Field(default=None, alias="LOOM_RERANK_MODEL")
    llm_timeout_seconds: float = Field(default=30.0, gt=0, alias="LOOM_LLM_TIMEOUT_SECONDS")
    llm_max_retries: int = Field(default=2, ge=0, alias="LOOM_LLM_MAX_RETRIES")
    openai_base_url: str | None = Field(default=None, alias="LOOM_OPENAI_BASE_URL")
    openai_api_key: SecretStr | None = Field(default=None, alias="LOOM_OPENAI_API_KEY")
    openai_model: str | None = Field(default=None, alias="LOOM_OPENAI_MODEL")
    summary_max_tokens: int = Field(default=600, ge=32, alias="LOOM_SUMMARY_MAX_TOKENS")
    summary_input_tokens: int = Field(default=100_000, ge=1000, alias="LOOM_SUMMARY_INPUT_TOKENS")

    # Search (BM25 parameters, conversation window; rerank deadline and cache lifetime)
    search_bm25_k1: float = Field(default=1.2, ge=0, le=10, alias="LOOM_SEARCH_BM25_K1")
    search_bm25_b: float = Field(default=0.75, ge=0, le=1, alias="LOOM_SEARCH_BM25_B")
    # Conversation-aware ranking (app/search/bm25.py): a message's own BM25 plus weight x the
    # BM25 of the turns within `window` of it; 0 and 0 give plain BM25.
    search_window: int = Field(default=2, ge=0, le=10, alias="LOOM_SEARCH_WINDOW")
    search_window_weight: float = Field(
        default=2.0, ge=0, le=100, alias="LOOM_SEARCH_WINDOW_WEIGHT"
    )
    # Messages created on a date the query names ("in May 2023") score this many times more
    # (1: off).
    search_date_boost: float = Field(default=3.0, ge=1, le=100, alias="LOOM_SEARCH_DATE_BOOST")
    # Messages whose author the query names ("What did Nate say...": a message's `name`, or
    # a leading "Nate:") score this many times more (1: off; app/search/speakers.py).
    search_speaker_boost: float = Field(
        default=1.3, ge=1, le=100, alias="LOOM_SEARCH_SPEAKER_BOOST"
    )
    # Which turns hold facts (app/messages/prior.py, docs/search-prior.md): scores times
    # exp(weight x a message's stored prior) (0: off); the turns after a message weigh this
    # much in its window (those before 1); a time question boosts messages with a time
    # expression this many times (1: off).
    search_prior_weight: float = Field(default=0.15, ge=0, le=1, alias="LOOM_SEARCH_PRIOR_WEIGHT")
    search_window_after_weight: float = Field(
        default=0.5, ge=0, le=1, alias="LOOM_SEARCH_WINDOW_AFTER_WEIGHT"
    )
    search_when_boost: float = Field(default=1.5, ge=1, le=100, alias="LOOM_SEARCH_WHEN_BOOST")
    search_rerank_timeout_seconds: float = Field(
        default=10.0, gt=0, alias="LOOM_SEARCH_RERANK_TIMEOUT_SECONDS"
    )
    search_rerank_cache_ttl_seconds: int = Field(
        default=3600, ge=0, alias="LOOM_SEARCH_RERANK_CACHE_TTL_SECONDS"
    )

    # Shared memory (app/shared_memory). Sizes in bytes.
    shared_memory_cache_bytes: int = Field(
        default=1024**3, ge=0, alias="LOOM_SHARED_MEMORY_CACHE_BYTES"
    )
    shared_memory_max_value_bytes: int = Field(
        default=32 * 1024**2, ge=1, alias="LOOM_SHARED_MEMORY_MAX_VALUE_BYTES"
    )
    shared_memory_compress_threshold_bytes: int = Field(
        default=1024**2, ge=0, alias="LOOM_SHARED_MEMORY_COMPRESS_THRESHOLD_BYTES"
    )
    shared_memory_require_if_match: bool = Field(
        default=False, alias="LOOM_SHARED_MEMORY_REQUIRE_IF_MATCH"
    )
    shared_memory_watch_queue: int = Field(
        default=256, ge=1, alias="LOOM_SHARED_MEMORY_WATCH_QUEUE"
    )
    tool_result_offload_bytes: int = Field(
        default=100 * 1024, ge=1, alias="LOOM_TOOL_RESULT_OFFLOAD_BYTES"
    )
    tool_result_ttl_seconds: int = Field(default=3600, ge=1, alias="LOOM_TOOL_RESULT_TTL_SECONDS")

    # Knowledge tiers (app/knowledge)
    knowledge_max_items: int = Field(default=1000, ge=1, alias="LOOM_KNOWLEDGE_MAX_ITEMS")
    knowledge_max_candidates: int = Field(default=2000, ge=1, alias="LOOM_KNOWLEDGE_MAX_CANDIDATES")

    # Worker
    queue_name: str = Field(default="arq:queue", alias="LOOM_QUEUE_NAME")
    run_worker_in_serve: bool = Field(default=True, alias="LOOM_RUN_WORKER")
    # Background compression (arq jobs; app/memory/tasks.py)
    # POST .../memory/compress?wait=true answers 202 with the job status past this
    compress_wait_seconds: float = Field(default=30.0, gt=0, alias="LOOM_COMPRESS_WAIT_SECONDS")
    compress_job_timeout_seconds: float = Field(
        default=300.0, gt=0, alias="LOOM_COMPRESS_JOB_TIMEOUT_SECONDS"
    )
    compress_max_tries: int = Field(default=5, ge=1, le=50, alias="LOOM_COMPRESS_MAX_TRIES")
    compress_retry_base_seconds: float = Field(
        default=5.0, ge=0, alias="LOOM_COMPRESS_RETRY_BASE_SECONDS"
    )
    compress_llm_tries: int = Field(default=3, ge=1, alias="LOOM_COMPRESS_LLM_TRIES")
    compress_cron_seconds: int = Field(default=60, ge=1, le=60, alias="LOOM_COMPRESS_CRON_SECONDS")
    compress_busy_usage: float = Field(default=0.70, gt=0, le=1, alias="LOOM_COMPRESS_BUSY_USAGE")
    compress_cron_batch: int = Field(default=500, ge=1, alias="LOOM_COMPRESS_CRON_BATCH")
    # Fact extraction (arq jobs; app/facts/tasks.py)
    facts_max_tries: int = Field(default=4, ge=1, le=50, alias="LOOM_FACTS_MAX_TRIES")
    facts_retry_base_seconds: float = Field(
        default=2.0, ge=0, alias="LOOM_FACTS_RETRY_BASE_SECONDS"
    )
    facts_job_timeout_seconds: float = Field(
        default=300.0, gt=0, alias="LOOM_FACTS_JOB_TIMEOUT_SECONDS"
    )
    facts_wait_seconds: float = Field(default=60.0, gt=0, alias="LOOM_FACTS_WAIT_SECONDS")
    # the rendered prompt of one extraction call (a longer backlog is split into batches)
    facts_input_tokens: int = Field(default=8000, ge=500, alias="LOOM_FACTS_INPUT_TOKENS")
    # extraction follows the conversation (app/facts/trigger.py): at once after
    # this many new messages, else after this many seconds without one
    facts_every_messages: int = Field(default=6, ge=1, le=10_000, alias="LOOM_FACTS_EVERY_MESSAGES")
    facts_quiet_seconds: float = Field(
        default=60.0, ge=0, le=86_400, alias="LOOM_FACTS_QUIET_SECONDS"
    )
    # a quiet run needs this many user messages waiting; fewer wait for the idle
    # time (or the session's end), so a slow typist does not cost a call per turn
    facts_quiet_min_user: int = Field(default=3, ge=1, le=1000, alias="LOOM_FACTS_QUIET_MIN_USER")
    facts_idle_seconds: float = Field(default=900.0, gt=0, alias="LOOM_FACTS_IDLE_SECONDS")
    facts_max_tokens: int = Field(default=2000, ge=64, alias="LOOM_FACTS_MAX_TOKENS")
    # Context manifests (app/manifests/tasks.py): the worker's sweep keeps
    # the newest N recorded builds of a session (0: no count limit), none older than T days
    # (0: no age limit), deleting at most `batch` rows a pass
    context_manifests_keep: int = Field(default=200, ge=0, alias="LOOM_CONTEXT_MANIFESTS_KEEP")
    context_manifests_days: float = Field(default=30.0, ge=0, alias="LOOM_CONTEXT_MANIFESTS_DAYS")
    context_manifests_sweep_seconds: int = Field(
        default=60, ge=1, le=60, alias="LOOM_CONTEXT_MANIFESTS_SWEEP_SECONDS"
    )
    context_manifests_sweep_batch: int = Field(
        default=10_000, ge=1, alias="LOOM_CONTEXT_MANIFESTS_SWEEP_BATCH"
    )
    worker_metrics_port: int | None = Field(
        default=None, ge=0, le=65535, alias="LOOM_WORKER_METRICS_PORT"
    )
    worker_job_timeout_seconds: float = Field(
        default=300.0, gt=0, alias="LOOM_WORKER_JOB_TIMEOUT_SECONDS"
    )
    # A job whose worker died is run again by another worker within this (the running
    # worker renews a lease on the job; see app/jobs/lease.py).
    job_recovery_seconds: float = Field(default=30.0, ge=3, alias="LOOM_JOB_RECOVERY_SECONDS")
    # Erasure (app/erasure). The keyed hash of erased subjects' ids: this secret
    # when set, else derived from LOOM_ADMIN_KEY and DATABASE_URL (as cursors are).
    erasure_secret: SecretStr | None = Field(default=None, alias="LOOM_ERASURE_SECRET")
    # Rows deleted per transaction, and an optional pause between batches (lowers the
    # erasure's share of the database while other tenants work).
    erasure_batch: int = Field(default=20_000, ge=1, le=1_000_000, alias="LOOM_ERASURE_BATCH")
    erasure_pause_seconds: float = Field(
        default=0.0, ge=0, le=60, alias="LOOM_ERASURE_PAUSE_SECONDS"
    )
    # Subjects with at most this many messages are erased in the request; bigger ones by a
    # worker job (the request answers 202 with the running receipt).
    erasure_inline_messages: int = Field(default=5_000, ge=0, alias="LOOM_ERASURE_INLINE_MESSAGES")
    # A running erasure untouched this long is resumed by the worker's sweep (its runner
    # died: a killed API or worker).
    erasure_recovery_seconds: float = Field(
        default=30.0, ge=1, alias="LOOM_ERASURE_RECOVERY_SECONDS"
    )
    # Longest wait between reconnect attempts of a worker that lost Redis, and between
    # restarts of a child process `serve` supervises.
    worker_reconnect_max_seconds: float = Field(
        default=10.0, gt=0, alias="LOOM_WORKER_RECONNECT_MAX_SECONDS"
    )

    @field_validator("database_url")
    @classmethod
    def _asyncpg_dsn(cls, v: str | None) -> str | None:
        return async_dsn(v) if v else v


def libpq_dsn(url: str) -> str:
    """The plain libpq form asyncpg takes (`postgresql+asyncpg://` -> `postgresql://`)."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+', 1)[0]}{sep}{rest}"


def async_dsn(url: str) -> str:
    """Normalise any PostgreSQL URL to the asyncpg driver form SQLAlchemy needs."""
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


@lru_cache
def get_settings() -> Settings:
    return Settings()

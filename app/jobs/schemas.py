"""API view of a session's compression job."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

JobStatus = Literal["pending", "running", "succeeded", "failed"]


class CompressionJobPublic(BaseModel):
    """The latest background compression job of a session and its lifetime counters."""

    status: JobStatus = Field(
        description="pending = queued (or waiting for the queue to "
        "come back), running, succeeded, failed (gave up; see "
        "last_error)."
    )
    job_id: str | None = None
    attempts: int = Field(0, description="Tries of the current/last job.")
    last_error: str | None = Field(None, description="Why the last try failed, if it did.")
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    runs: int = Field(0, description="Jobs finished for this session, ever.")
    summaries_written: int = 0
    tokens_saved: int = Field(0, description="Covered message tokens minus summary tokens.")


JobKind = Literal["compression", "facts"]
ListedStatus = Literal["pending", "running", "succeeded", "failed", "skipped", "idle"]


class JobListed(BaseModel):
    """A session's latest background job of one kind (compression or fact extraction)."""

    kind: JobKind
    session_id: str
    agent_id: str
    status: str = Field(
        description="pending, running, succeeded, failed; fact extractions "
        "also idle (never ran) and skipped (e.g. no LLM)."
    )
    attempts: int
    last_error: str | None = None
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime


class QueueStatus(BaseModel):
    """The deployment's job queue (shown to service and admin keys)."""

    depth: int = Field(description="Jobs waiting in the queue (queued or deferred).")
    worker_alive: bool = Field(
        description="A worker reported within the last health-check interval (10 s)."
    )
    worker_report: str | None = Field(
        None,
        description="The latest worker report (arq: "
        "jobs complete, failed, retried, ongoing, queued).",
    )


class JobList(BaseModel):
    """One page of a tenant's jobs, most recently changed first."""

    items: list[JobListed]
    next_cursor: str | None = None
    queue: QueueStatus | None = Field(None, description="null for agent keys.")

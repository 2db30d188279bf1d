"""API view of a session's compression job."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

JobStatus = Literal["pending", "running", "succeeded", "failed"]


class CompressionJobPublic(BaseModel):
    """The latest background compression job of a session and its lifetime counters."""

    status: JobStatus = Field(description="pending = queued (or waiting for the queue to "
                              "come back), running, succeeded, failed (gave up; see "
                              "last_error).")
    job_id: str | None = None
    attempts: int = Field(0, description="Tries of the current/last job.")
    last_error: str | None = Field(None, description="Why the last try failed, if it did.")
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    runs: int = Field(0, description="Jobs finished for this session, ever.")
    summaries_written: int = 0
    tokens_saved: int = Field(0, description="Covered message tokens minus summary tokens.")

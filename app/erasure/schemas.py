"""API schemas of erasure receipts."""

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.erasure.policy import COUNT_KINDS


class ErasurePublic(BaseModel):
    """The receipt of an erasure: what was deleted, per kind of data, and when."""

    erasure_id: uuid.UUID
    kind: Literal["user", "session", "agent"] = Field(
        description=("What was erased: a user, one session, or an agent's private memory.")
    )
    status: Literal["running", "completed"] = Field(
        description=(
            "`running`: the subject already reads as deleted everywhere and its rows are going "
            "in batches; `completed`: nothing of it is left."
        )
    )
    counts: dict[str, int] = Field(
        description=(
            "Rows deleted per kind of data (so far, while running): "
            + ", ".join(f"`{k}`" for k in COUNT_KINDS)
            + ". `queued_jobs` counts background jobs removed from the queue."
        )
    )
    requested_by: uuid.UUID | None = Field(description="The API key that asked.")
    started_at: datetime
    finished_at: datetime | None


class ErasureList(BaseModel):
    items: list[ErasurePublic]

"""Users, erasure receipts and import results (issue 28)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from loom_client.models._base import Page, ResponseModel


class User(ResponseModel):
    """A person sessions are with: session and message counts, last activity."""

    id: str
    session_count: int
    message_count: int
    first_seen: datetime | None = None
    last_activity: datetime | None = None
    fact_count: int | None = None


class UserList(Page):
    items: list[User]


class Erasure(ResponseModel):
    """The receipt of an erasure: rows deleted per kind of data, start and end."""

    erasure_id: str
    kind: Literal["user", "session", "agent"]
    status: Literal["running", "completed"]
    counts: dict[str, int]
    requested_by: str | None = None
    started_at: datetime
    finished_at: datetime | None = None


class ErasureList(ResponseModel):
    items: list[Erasure]


class ImportResult(ResponseModel):
    inserted: dict[str, int]
    already_present: dict[str, int]

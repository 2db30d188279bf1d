"""What the LLM cost: the usage report and the daily token budget (issue 47)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from loom_client.models._base import ResponseModel

UsageGroupBy = Literal["day", "purpose", "model", "session", "user", "agent"]


class UsageGroup(ResponseModel):
    """The LLM calls of one group (a UTC day, purpose, model, session, user or agent)."""

    key: str | None = None
    calls: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    failed_calls: int
    avg_latency_ms: int


class Budget(ResponseModel):
    """A tenant's daily token budget in force and today's spending."""

    tenant_id: str
    daily_tokens: int | None = None
    source: Literal["tenant", "default", "none"]
    used_today: int
    spent: bool
    resets_at: datetime


class UsageReport(ResponseModel):
    """A tenant's LLM calls over a range, grouped, with the total and the budget."""

    group_by: UsageGroupBy
    since: datetime
    until: datetime
    items: list[UsageGroup]
    total: UsageGroup
    truncated: bool
    budget: Budget

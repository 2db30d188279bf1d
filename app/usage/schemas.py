"""The usage report and the budget, as the API shows them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GroupBy = Literal["day", "purpose", "model", "session", "user", "agent"]


class UsageGroup(BaseModel):
    """The calls of one group (one day, purpose, model, session, user or agent)."""

    key: str | None = Field(
        description="The group: a UTC day (YYYY-MM-DD), a purpose (summary, fact_recording, "
        "fact_decision, rerank...), a model, a session id, a user id or an agent id; null "
        "for calls of no session / user / agent (or anonymised by an erasure)."
    )
    calls: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    failed_calls: int = Field(
        description="Calls that failed or timed out (their tokens, if any, count)."
    )
    avg_latency_ms: int


class BudgetPublic(BaseModel):
    """A tenant's daily token budget (input + output tokens per UTC day) and today's use."""

    tenant_id: uuid.UUID
    daily_tokens: int | None = Field(
        description="The budget in force; null: none (LLM work is never held back)."
    )
    source: Literal["tenant", "default", "none"] = Field(
        description="`tenant`: set for this tenant; `default`: LOOM_DAILY_TOKEN_BUDGET; "
        "`none`: no budget."
    )
    used_today: int = Field(description="Tokens spent since 00:00 UTC.")
    spent: bool = Field(
        description="True when today's budget is spent: summaries are heuristic, fact "
        "extraction waits (status `skipped`, `skipped: budget`) and search is not reranked "
        "(`rerank_skipped: budget`) until the next UTC day or a raised budget."
    )
    resets_at: datetime = Field(description="The next 00:00 UTC.")


class BudgetSet(BaseModel):
    """A tenant's own daily token budget."""

    model_config = ConfigDict(extra="forbid")

    daily_tokens: int | None = Field(
        ge=0,
        le=10**15,
        description="Input + output tokens per UTC day; null: no budget for this tenant "
        "whatever the default (DELETE goes back to the default).",
    )


class UsageReport(BaseModel):
    """A tenant's LLM calls over a time range, grouped."""

    group_by: GroupBy
    since: datetime
    until: datetime
    items: list[UsageGroup]
    total: UsageGroup = Field(description="Every call of the range (`key` null).")
    truncated: bool = Field(description="More groups than `limit` (the rest are left out).")
    budget: BudgetPublic

"""The LLM cost ledger: one row per LLM call, and a tenant's daily token budget."""

import uuid
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.models.base import row_columns, tenant_key, tenant_pk, ts_column, utcnow


class LlmUsage(SQLModel, table=True):
    """One LLM call (`app.llm.usage`): who it was for, why, and what it cost. Written in
    batches by the process that made the call; no key to its session (a deleted session's
    spending still counts), and an erasure blanks its `user_id` and `session_id`
    (`llm_usage_anonymised` in `app.erasure.repository`), leaving the day, purpose and
    model's totals."""

    __tablename__ = "llm_usage"
    __table_args__ = (
        tenant_pk("llm_usage", "id"),
        # the report and the budget: a tenant's calls in a time range
        sa.Index("ix_llm_usage_at", "tenant_id", "at"),
        # erasure: a user's and a session's rows
        sa.Index("ix_llm_usage_user", "tenant_id", "user_id"),
        sa.Index("ix_llm_usage_session", "tenant_id", "session_id"),
    )

    id: uuid.UUID = Field(primary_key=True)  # time-ordered (app.models.base.time_ordered_id)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    agent_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    user_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    session_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid))
    purpose: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    provider: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    model: str = Field(sa_column=sa.Column(sa.String(200), nullable=False))
    input_tokens: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    output_tokens: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    latency_ms: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    outcome: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))


class TenantBudget(SQLModel, table=True):
    """A tenant's own daily token budget (input + output tokens per UTC day), set by an
    admin; without a row the tenant has `LOOM_DAILY_TOKEN_BUDGET`. `daily_tokens` null:
    no budget for this tenant, whatever the default."""

    __tablename__ = "tenant_budgets"
    __table_args__ = (tenant_pk("tenant_budgets"),)

    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    daily_tokens: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class BudgetRow(NamedTuple):
    """A tenant's own budget as `app.usage.repository.get_budget` reads it."""

    daily_tokens: int | None
    updated_at: datetime


BUDGET_ROW_COLUMNS = row_columns(BudgetRow._fields, TenantBudget)

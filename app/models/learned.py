import uuid
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from app.models.base import new_id, row_columns, tenant_key, tenant_pk, ts_column, utcnow


class LearnedVersion(SQLModel, table=True):
    """One immutable version of an agent's learned artifacts (DSPy-style results)."""

    __tablename__ = "learned_versions"
    __table_args__ = (
        tenant_pk("learned_versions", "id"),
        sa.UniqueConstraint(
            "tenant_id", "agent_id", "version", name="uq_learned_versions_agent_version"
        ),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    agent_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False))
    version: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    # {"signatures": {...}, "demonstrations": [...], "tuned_prompts": {...}, "metadata": {...}}
    content: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(JSONB, nullable=False)
    )
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class LearnedHead(SQLModel, table=True):
    """Per agent: the active version and the highest version number handed out.

    Versions are allocated by an atomic upsert on this row, so concurrent PUTs
    never collide, and rollback only moves ``active_version``.
    """

    __tablename__ = "learned_heads"
    __table_args__ = (
        tenant_pk("learned_heads", "id"),
        sa.UniqueConstraint("tenant_id", "agent_id", name="uq_learned_heads_agent"),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    agent_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False))
    active_version: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    latest_version: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class LearnedVersionRow(NamedTuple):
    """A learned version as its readers take it (every column of `LearnedVersion`)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    agent_id: str
    version: int
    content: dict[str, Any]
    created_at: datetime


LEARNED_VERSION_ROW_COLUMNS = row_columns(LearnedVersionRow._fields, LearnedVersion)


class LearnedHeadRow(NamedTuple):
    """An agent's learned head as its readers take it (every column of `LearnedHead`)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    agent_id: str
    active_version: int
    latest_version: int
    updated_at: datetime


LEARNED_HEAD_ROW_COLUMNS = row_columns(LearnedHeadRow._fields, LearnedHead)

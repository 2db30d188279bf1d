import uuid
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from app.models.base import new_id, row_columns, tenant_key, tenant_pk, ts_column, utcnow


class AgentProfile(SQLModel, table=True):
    """One published version of an agent's ROM source; versions are never edited."""

    __tablename__ = "agent_profiles"
    __table_args__ = (
        tenant_pk("agent_profiles", "id"),
        sa.UniqueConstraint(
            "tenant_id", "agent_id", "version", name="uq_agent_profiles_tenant_agent_version"
        ),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    agent_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False))
    version: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    system_prompt: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    patterns: list[Any] = Field(default_factory=list, sa_column=sa.Column(JSONB, nullable=False))
    backend_schema: Any = Field(default=None, sa_column=sa.Column(JSONB))
    # default fact extraction config of the agent's new sessions (null = off)
    facts: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(JSONB))
    # default `config.audit` of the agent's new sessions (null = off)
    audit: bool | None = Field(default=None, sa_column=sa.Column(sa.Boolean))
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class ProfileRow(NamedTuple):
    """A published profile version as `app.profiles.repository` reads it."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    agent_id: str
    version: int
    system_prompt: str
    patterns: list[Any]
    backend_schema: Any
    facts: dict[str, Any] | None
    audit: bool | None
    created_at: datetime


PROFILE_ROW_COLUMNS = row_columns(ProfileRow._fields, AgentProfile)

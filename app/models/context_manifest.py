"""Context manifests: what the model saw in one context build, and why."""

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSON
from sqlmodel import Field, SQLModel

from app.models.base import session_fk, tenant_key, tenant_pk, ts_column, utcnow


class ContextManifest(SQLModel, table=True):
    """One recorded context build (`app.manifests.record`): ids, versions and hashes of
    what it was made of, never the content (replay re-reads the sources). Written in the
    build's own request before the response is sent; goes with its session; the worker's
    sweep keeps the newest `LOOM_CONTEXT_MANIFESTS_KEEP` per session for at most
    `LOOM_CONTEXT_MANIFESTS_DAYS`."""

    __tablename__ = "context_manifests"
    __table_args__ = (
        tenant_pk("context_manifests", "id"),
        session_fk("context_manifests"),
        # a session's history, newest first (the list, the per-session retention)
        sa.Index(
            "ix_context_manifests_session_created", "tenant_id", "session_id", "created_at", "id"
        ),
        # the age sweep, across tenants
        sa.Index("ix_context_manifests_created", "created_at"),
    )

    id: uuid.UUID = Field(primary_key=True)  # the build's context_id
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, nullable=False))
    format: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    total_tokens: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    budget: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    # json text, not jsonb: written on the hot path, read whole (migration 0018)
    manifest: dict[str, Any] = Field(sa_column=sa.Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())

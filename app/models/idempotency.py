import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from app.models.base import session_fk, tenant_key, tenant_pk, ts_column, utcnow


class IdempotencyRecord(SQLModel, table=True):
    """The first response to a request made with an Idempotency-Key."""

    __tablename__ = "idempotency_records"
    __table_args__ = (
        tenant_pk("idempotency_records", "session_id", "key"),
        session_fk("idempotency_records"),
    )

    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    key: str = Field(sa_column=sa.Column(sa.String(255), primary_key=True))
    request_hash: str = Field(sa_column=sa.Column(sa.String(64), nullable=False))
    status_code: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    response: dict[str, Any] = Field(sa_column=sa.Column(JSONB, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())

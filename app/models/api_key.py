import uuid
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.models.base import (
    new_id,
    optional_ts_column,
    row_columns,
    tenant_fk,
    ts_column,
    utcnow,
)


class ApiKey(SQLModel, table=True):
    """An API key. A small global table (with `tenants`): a request is authenticated by the
    key's hash before its tenant is known, so keys are looked up across tenants; a Citus
    reference table, copied to every node (docs/scaling.md)."""

    __tablename__ = "api_keys"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_fk())
    name: str = Field(
        default="", sa_column=sa.Column(sa.String(200), nullable=False, server_default="")
    )
    role: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    agent_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    # SHA-256 of the secret. Keys carry 256 random bits, so a slow hash adds nothing.
    key_hash: str = Field(sa_column=sa.Column(sa.String(64), nullable=False, unique=True))
    prefix: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    revoked_at: datetime | None = Field(default=None, sa_column=optional_ts_column())


class ApiKeyRow(NamedTuple):
    """An API key as `app.auth.repository` reads it (every column): plain and immutable."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    role: str
    agent_id: str | None
    key_hash: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


API_KEY_ROW_COLUMNS = row_columns(ApiKeyRow._fields, ApiKey)

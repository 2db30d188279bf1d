import uuid
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.models.base import new_id, row_columns, ts_column, utcnow


class Tenant(SQLModel, table=True):
    """A tenant. One of the two small global tables (with `api_keys`) that every request
    reads: not distributed by tenant but copied to every node (a Citus reference table;
    docs/scaling.md). Every other table is tenant-owned, with `tenant_id` leading its keys."""

    __tablename__ = "tenants"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    # A tenant row is its own tenant; the column keeps the "every table has tenant_id" rule.
    tenant_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, nullable=False, unique=True))
    # unique per deployment: `create-key --tenant-name` and people find a tenant by it
    name: str = Field(sa_column=sa.Column(sa.String(200), nullable=False, unique=True))
    text_search_config: str = Field(
        default="english",
        sa_column=sa.Column(sa.String(64), nullable=False, server_default="english"),
    )
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class TenantRow(NamedTuple):
    """A tenant as `app.auth.repository` reads it: plain and immutable."""

    id: uuid.UUID
    name: str
    text_search_config: str
    created_at: datetime


TENANT_ROW_COLUMNS = row_columns(TenantRow._fields, Tenant)

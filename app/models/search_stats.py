import uuid
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.models.base import session_fk, tenant_key, tenant_pk, ts_column, utcnow


class SearchStats(SQLModel, table=True):
    """BM25 statistics of one session's messages, valid through `through_seq`.

    Written lazily by searches (see app/search/repository.py), never by appends.
    """

    __tablename__ = "search_stats"
    __table_args__ = (tenant_pk("search_stats", "session_id"), session_fk("search_stats"))

    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    # Messages with at least one lexeme position, and the sum of their positions.
    doc_count: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    total_length: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    through_seq: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())

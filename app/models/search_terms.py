import uuid

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.models.base import session_fk, tenant_key, tenant_pk


class SearchTerm(SQLModel, table=True):
    """How many of one session's messages hold one lexeme (BM25's n(t), per session),
    valid through the session's `search_stats.through_seq`; `through_seq` here is the
    fold that last wrote the row (it guards against a stale fold writing over a newer one).

    Written lazily by searches with `search_stats`, in the same statement (see
    app/search/repository.py), never by appends; the rows go with their session.
    """

    __tablename__ = "search_terms"
    __table_args__ = (
        tenant_pk("search_terms", "session_id", "lexeme"),
        session_fk("search_terms"),
        # n(t) over a scope: one range per query lexeme, the sessions and counts in the
        # index (the primary key would take one probe per session)
        sa.Index(
            "ix_search_terms_lexeme",
            "tenant_id",
            "lexeme",
            "session_id",
            postgresql_include=["docs"],
        ),
    )

    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    lexeme: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    docs: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    through_seq: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))

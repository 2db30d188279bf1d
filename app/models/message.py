import uuid
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlmodel import Field, SQLModel

from app.models.base import row_columns, session_fk, tenant_key, tenant_pk, ts_column, utcnow

# A message's search index covers its text's first this many characters (about 25,000
# tokens): the rest is stored and returned, not indexed. It bounds what an append asks of
# PostgreSQL whatever the message's size (a 5 MB text took longer to index than a request
# may wait on a loaded machine), and keeps a vector within `tsvector`'s 1 MiB.
SEARCH_INDEX_CHARS = 100_000
# the indexed part of a row's text, in SQL (`text` names the text)
INDEXED_TEXT_SQL = f"left({{text}}, {SEARCH_INDEX_CHARS})"


class Message(SQLModel, table=True):
    """One message of a session, append-only; (tenant_id, session_id, seq) is its identity."""

    __tablename__ = "messages"
    __table_args__ = (
        tenant_pk("messages", "session_id", "seq"),
        session_fk("messages"),
        # the text index knows the session (migration 0011; app.search.repository)
        sa.Index(
            "ix_messages_search_scoped",
            sa.text("(array_to_tsvector(ARRAY['s' || session_id::text]) || search_vector)"),
            postgresql_using="gin",
        ),
    )

    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    seq: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True))
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    role: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    # Canonical content: a string, or a list of Anthropic-style blocks without tool_use /
    # tool_result (those live in tool_calls / tool_use_id).
    content: Any = Field(default=None, sa_column=sa.Column(JSONB))
    tool_calls: list[dict[str, Any]] | None = Field(default=None, sa_column=sa.Column(JSONB))
    tool_use_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    is_error: bool = Field(
        default=False, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false())
    )
    name: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    text: str = Field(default="", sa_column=sa.Column(sa.Text, nullable=False, server_default=""))
    token_count: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    meta: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=sa.Column(
            "metadata", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")
        ),
    )
    # Filled in the INSERT with the tenant's text search configuration.
    search_vector: Any = Field(default=None, sa_column=sa.Column(TSVECTOR))
    # BM25 |d|: lexeme positions in search_vector (generated; migration 0006_search).
    search_length: int = Field(
        default=0,
        sa_column=sa.Column(
            sa.Integer,
            sa.Computed("coalesce(loom_tsvector_length(search_vector), 0)", persisted=True),
            nullable=False,
        ),
    )
    # The informativeness prior (the logit of `app.messages.prior`) and whether the text
    # carries a time expression, computed by the insert (migration 0020_message_prior).
    prior: float = Field(
        default=0.0, sa_column=sa.Column(sa.REAL, nullable=False, server_default="0")
    )
    timed: bool = Field(
        default=False,
        sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false()),
    )
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class StoredMessage(NamedTuple):
    """A read message as a plain, immutable row (no ORM instance): every attribute the
    memory policy, the builder and the renderers use (`Message`'s attribute names), no
    search vector, and the text only where the read asks for it. Read from the JSON of the
    memory read (`app.memory.repository.read`), ids and times stay text; search results read
    typed columns. A NamedTuple rather than a frozen dataclass: a context build makes dozens
    per request, and a frozen dataclass's `__init__` costs about three times as much."""

    session_id: Any
    seq: int
    role: str
    content: Any
    tool_calls: list[dict[str, Any]] | None
    tool_use_id: str | None
    is_error: bool
    name: str | None
    token_count: int
    meta: dict[str, Any]
    created_at: Any
    text: str | None = None


# The columns a message is read with wherever the whole row is not needed (context builds,
# promotion, search results): `StoredMessage`'s fields but the text, from the table model.
MESSAGE_ROW_COLUMNS: tuple[str, ...] = row_columns(StoredMessage._fields[:-1], Message)


def message_row_sql() -> str:
    """`MESSAGE_ROW_COLUMNS` as a SQL select list (named as `StoredMessage`'s fields)."""
    return ", ".join(
        c if c == f else f"{c} AS {f}"
        for c, f in zip(MESSAGE_ROW_COLUMNS, StoredMessage._fields, strict=False)
    )

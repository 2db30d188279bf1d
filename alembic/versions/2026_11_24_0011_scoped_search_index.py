"""Text index that knows the session: a session search reads only its session's matches.

The GIN index over `search_vector` answered every scope with the tenant-wide matches of
the query, which a session search then filtered by session: at 160,000 messages a session
search read 17,663 index entries to keep 1,083. The new index covers the vector plus one
lexeme naming the session (`s<session id>`, no position, so BM25 lengths and term
frequencies are unchanged), so a session search asks for `'s<id>' & (terms)` and reads only
its own entries; agent and tenant scopes query the same expression with the terms alone. It
replaces the old index (one text index to keep up on every append).

Revision ID: 0011_scoped_search_index
Revises: 0010_swapped_tokens
Create Date: 2026-11-24 17:15:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011_scoped_search_index"
down_revision: str | Sequence[str] | None = "0010_swapped_tokens"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# app.search.repository.SCOPED_VECTOR: the index expression, as the queries spell it
EXPRESSION = "(array_to_tsvector(ARRAY['s' || session_id::text]) || search_vector)"


def upgrade() -> None:
    op.execute(f"CREATE INDEX ix_messages_search_scoped ON messages USING gin ({EXPRESSION})")
    op.drop_index("ix_messages_search_vector", table_name="messages", postgresql_using="gin")


def downgrade() -> None:
    op.create_index(
        "ix_messages_search_vector",
        "messages",
        ["search_vector"],
        unique=False,
        postgresql_using="gin",
    )
    op.drop_index("ix_messages_search_scoped", table_name="messages")

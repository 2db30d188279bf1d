"""Search that knows which turns hold facts (issue 48): every message stores its
informativeness prior (`messages.prior`, the logit of `app.search.prior`) and whether it
carries a time expression (`messages.timed`), computed once when it is stored.

Revision ID: 0020_message_prior
Revises: 0019_facts_months
Create Date: 2026-11-29 05:00:00

The columns are added with constant defaults (no table rewrite), then the existing
messages are backfilled here, in keyset batches over the primary key: the prior reads the
message before each one in its session, which PostgreSQL alone cannot compute with the
Python model. docs/search-prior.md gives the time it takes per million messages, and how
to run the backfill again after the model's weights change (`backfill`).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.messages import prior as turn_prior

revision: str = "0020_message_prior"
down_revision: str | Sequence[str] | None = "0019_facts_months"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000

_READ = sa.text("""
SELECT tenant_id, session_id, seq, role, text FROM messages
WHERE (tenant_id, session_id, seq) > (:t, :s, :q)
ORDER BY tenant_id, session_id, seq
LIMIT :n
""")
_FIRST = sa.text("""
SELECT tenant_id, session_id, seq, role, text FROM messages
ORDER BY tenant_id, session_id, seq
LIMIT :n
""")
# One statement per tenant of a batch: each one stays within its tenant's partition (or
# Citus shard).
_WRITE = sa.text("""
UPDATE messages m SET prior = u.prior, timed = u.timed
FROM unnest(CAST(:s AS uuid[]), CAST(:q AS bigint[]), CAST(:p AS real[]),
            CAST(:f AS boolean[])) AS u(session_id, seq, prior, timed)
WHERE m.tenant_id = :t AND m.session_id = u.session_id AND m.seq = u.seq
""")


def backfill(conn: sa.Connection, batch: int = BATCH) -> int:
    """Compute and store every message's prior and time flag (the current model's); the
    number of messages written. Safe to run again (after the weights change)."""
    done = 0
    before: tuple[object, object, int, turn_prior.Before] | None = None
    rows = conn.execute(_FIRST, {"n": batch}).all()
    while rows:
        by_tenant: dict[object, tuple[list, list, list, list]] = {}
        for tenant_id, session_id, seq, role, text in rows:
            prev = None
            if (
                before is not None
                and before[:2] == (tenant_id, session_id)
                and before[2] == seq - 1
            ):
                prev = before[3]
            value = turn_prior.prior_of(text or "", role, prev)
            out = by_tenant.setdefault(tenant_id, ([], [], [], []))
            out[0].append(session_id)
            out[1].append(seq)
            out[2].append(value)
            out[3].append(turn_prior.timed(text or ""))
            before = (
                tenant_id,
                session_id,
                seq,
                turn_prior.Before(role, turn_prior.asks(text or "")),
            )
        for tenant_id, (s, q, p, f) in by_tenant.items():
            conn.execute(_WRITE, {"t": tenant_id, "s": s, "q": q, "p": p, "f": f})
        done += len(rows)
        last = rows[-1]
        rows = conn.execute(_READ, {"t": last[0], "s": last[1], "q": last[2], "n": batch}).all()
    return done


def upgrade() -> None:
    op.add_column("messages", sa.Column("prior", sa.REAL(), nullable=False, server_default="0"))
    op.add_column(
        "messages", sa.Column("timed", sa.Boolean(), nullable=False, server_default="false")
    )
    backfill(op.get_bind())


def downgrade() -> None:
    op.drop_column("messages", "timed")
    op.drop_column("messages", "prior")

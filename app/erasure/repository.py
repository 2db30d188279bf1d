"""Erasure SQL. Every statement names its tenant, except the recovery sweep (FAN_OUT).

Each delete runs as `counted`: one statement that deletes and adds the number of deleted
rows to the receipt (`erasures.counts`), so the count commits with the deletion and a
runner killed between two statements leaves an exact receipt.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.partitions import FAN_OUT
from app.models.base import table_of
from app.models.erasure import Erasure

E = table_of(Erasure)

# (jsonb_set and casts, not jsonb_build_object: Citus calls no stable function of a
# row's columns in an UPDATE)
_COUNTED = """
WITH d AS ({delete}), c AS (SELECT count(*) AS n FROM d)
UPDATE erasures e SET counts = jsonb_set(e.counts, ARRAY[CAST(:kind AS text)],
       CAST(CAST(coalesce((e.counts ->> CAST(:kind AS text))::bigint, 0) + c.n AS text)
            AS jsonb)), updated_at = now()
FROM c WHERE e.tenant_id = :t AND e.id = :e
RETURNING c.n
"""

# What one session leaves behind besides its messages (a kind of `policy.SESSION_KINDS` ->
# its DELETE; `:t` tenant, `:s` session, `:sc` the session id as a shared-memory scope),
# run as one statement (`SESSION_REST`). Messages go before, in batches (`MESSAGES_BATCH`);
# the session row last: whatever a racing writer added meanwhile goes with it (every
# session-owned table cascades from it).
SESSION_DELETES: tuple[tuple[str, str], ...] = (
    (
        "references",
        "DELETE FROM shared_memory_ref_holders WHERE tenant_id = :t "
        "AND session_id = :s RETURNING 1",
    ),
    (
        "shared_memory_entries",
        "DELETE FROM shared_memory_entries WHERE tenant_id = :t "
        "AND namespace = 'session' AND scope_id = :sc RETURNING 1",
    ),
    (
        "summaries",
        "DELETE FROM memory_summaries WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    (
        "snapshots",
        "DELETE FROM memory_snapshots WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    (
        "memory_states",
        "DELETE FROM memory_states WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    (
        "search_stats",
        "DELETE FROM search_stats WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    (
        "search_terms",
        "DELETE FROM search_terms WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    (
        "idempotency_records",
        "DELETE FROM idempotency_records WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    (
        "compression_jobs",
        "DELETE FROM compression_jobs WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    (
        "fact_extractions",
        "DELETE FROM fact_extractions WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    # what the model saw: a manifest keeps the recall query it searched with
    (
        "context_manifests",
        "DELETE FROM context_manifests WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
    # facts drawn from the session, in whatever tier, with every version of them, and the
    # versions of other facts that quote it
    (
        "fact_versions",
        "DELETE FROM memory_item_versions v WHERE v.tenant_id = :t AND "
        "(v.source_session_id = :s OR v.item_id IN (SELECT i.id FROM "
        "memory_items i WHERE i.tenant_id = :t AND i.source_session_id = :s)) "
        "RETURNING 1",
    ),
    (
        "facts",
        "DELETE FROM memory_items WHERE tenant_id = :t AND source_session_id = :s RETURNING 1",
    ),
    # the LLM cost ledger: the calls stay, counted by day, purpose and model,
    # but no longer say whose they were
    (
        "llm_usage_anonymised",
        "UPDATE llm_usage SET session_id = NULL, user_id = NULL, agent_id = NULL "
        "WHERE tenant_id = :t AND session_id = :s RETURNING 1",
    ),
)


def combined(deletes: tuple[tuple[str, str], ...]) -> str:
    """Several deletes (each of its own kind) as one statement that adds every count to
    the receipt: one transaction instead of one per kind (a user of many small sessions
    spent most of the erasure on round trips). The deletes see one snapshot; keys between
    their tables act at the end of the statement, on rows already gone."""
    ctes = ", ".join(f"d{i} AS ({sql})" for i, (_, sql) in enumerate(deletes))
    adds = " || ".join(
        f"jsonb_build_object('{kind}', coalesce((e.counts ->> '{kind}')::bigint, 0) "
        f"+ (SELECT count(*) FROM d{i}))"
        for i, (kind, _) in enumerate(deletes)
    )
    return (
        f"WITH {ctes} UPDATE erasures e SET counts = e.counts || {adds}, "
        "updated_at = now() WHERE e.tenant_id = :t AND e.id = :e"
    )


SESSION_REST = combined(SESSION_DELETES)
MESSAGES_BATCH = (
    "messages",
    "DELETE FROM messages WHERE tenant_id = :t AND session_id = :s "
    "AND seq > :lo AND seq <= :hi RETURNING 1",
)
SESSION_ROW = (
    "sessions",
    "DELETE FROM sessions WHERE tenant_id = :t AND id = :s AND erasure_id = :e RETURNING 1",
)

# A subject's own tier (`:k` the scope kind 'user' or 'agent', `:sub` its id), and for an
# agent its private shared-memory namespace with the references to it.
TIER_DELETES: tuple[tuple[str, str], ...] = (
    (
        "fact_versions",
        "DELETE FROM memory_item_versions v WHERE v.tenant_id = :t AND "
        "v.item_id IN (SELECT i.id FROM memory_items i WHERE i.tenant_id = :t "
        "AND i.scope_kind = :k AND i.scope_id = :sub) RETURNING 1",
    ),
    (
        "facts",
        "DELETE FROM memory_items WHERE tenant_id = :t AND scope_kind = :k "
        "AND scope_id = :sub RETURNING 1",
    ),
    # a user's LLM calls outside their sessions' (none today; the ledger allows it)
    (
        "llm_usage_anonymised",
        "UPDATE llm_usage SET session_id = NULL, user_id = NULL, agent_id = NULL "
        "WHERE tenant_id = :t AND :k = 'user' AND user_id = :sub RETURNING 1",
    ),
)
AGENT_NAMESPACE_DELETES: tuple[tuple[str, str], ...] = (
    (
        "references",
        "DELETE FROM shared_memory_ref_holders h USING shared_memory_entries x "
        "WHERE h.tenant_id = :t AND x.tenant_id = :t AND h.entry_id = x.id "
        "AND x.namespace = 'agent' AND x.scope_id = :sub RETURNING 1",
    ),
    (
        "shared_memory_entries",
        "DELETE FROM shared_memory_entries WHERE tenant_id = :t "
        "AND namespace = 'agent' AND scope_id = :sub RETURNING 1",
    ),
)


@dataclass(frozen=True, slots=True)
class ErasureRow:
    tenant_id: uuid.UUID
    id: uuid.UUID
    kind: str
    subject: str | None
    status: str
    counts: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    requested_by: uuid.UUID | None


def _row(r: Any) -> ErasureRow:
    return ErasureRow(
        r.tenant_id,
        r.id,
        r.kind,
        r.subject,
        r.status,
        dict(r.counts or {}),
        r.started_at,
        r.finished_at,
        r.requested_by,
    )


async def counted(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    erasure_id: uuid.UUID,
    kind: str,
    delete: str,
    params: dict[str, Any],
) -> int:
    """Run `delete` (a DELETE ... RETURNING 1) and add its row count to the receipt."""
    n = await db.scalar(
        sa.text(_COUNTED.format(delete=delete)),
        {**params, "t": tenant_id, "e": erasure_id, "kind": kind},
    )
    return int(n or 0)


async def run_combined(
    db: AsyncSession, tenant_id: uuid.UUID, erasure_id: uuid.UUID, sql: str, params: dict[str, Any]
) -> None:
    await db.execute(sa.text(sql), {**params, "t": tenant_id, "e": erasure_id})


async def add_count(
    db: AsyncSession, tenant_id: uuid.UUID, erasure_id: uuid.UUID, kind: str, n: int
) -> None:
    await db.execute(
        sa.text(
            "UPDATE erasures SET counts = jsonb_set(counts, ARRAY[CAST(:kind AS text)], "
            "CAST(CAST(coalesce((counts ->> CAST(:kind AS text))::bigint, 0) + :n AS text) "
            "AS jsonb)), updated_at = now() "
            "WHERE tenant_id = :t AND id = :e"
        ),
        {"t": tenant_id, "e": erasure_id, "kind": kind, "n": n},
    )


async def lock_subject(db: AsyncSession, key: str) -> None:
    """The exclusive side of the write guards' lock (held to the end of the transaction)."""
    await db.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(key, 0))))


async def insert(db: AsyncSession, row: Erasure) -> None:
    db.add(row)
    await db.flush()


async def get(db: AsyncSession, tenant_id: uuid.UUID, erasure_id: uuid.UUID) -> ErasureRow | None:
    r = (
        await db.execute(sa.select(E).where(E.c.tenant_id == tenant_id, E.c.id == erasure_id))
    ).first()
    return None if r is None else _row(r)


async def running_for(
    db: AsyncSession, tenant_id: uuid.UUID, kind: str, subject: str
) -> ErasureRow | None:
    r = (
        await db.execute(
            sa.select(E)
            .where(
                E.c.tenant_id == tenant_id,
                E.c.kind == kind,
                E.c.subject == subject,
                E.c.status == "running",
            )
            .order_by(E.c.started_at)
            .limit(1)
        )
    ).first()
    return None if r is None else _row(r)


async def latest(db: AsyncSession, tenant_id: uuid.UUID, limit: int) -> list[ErasureRow]:
    rows = await db.execute(
        sa.select(E)
        .where(E.c.tenant_id == tenant_id)
        .order_by(E.c.started_at.desc(), E.c.id)
        .limit(limit)
    )
    return [_row(r) for r in rows]


async def by_hash(
    db: AsyncSession, tenant_id: uuid.UUID, subject_hash: str, limit: int
) -> list[ErasureRow]:
    rows = await db.execute(
        sa.select(E)
        .where(E.c.tenant_id == tenant_id, E.c.subject_hash == subject_hash)
        .order_by(E.c.started_at.desc(), E.c.id)
        .limit(limit)
    )
    return [_row(r) for r in rows]


async def tombstone_user_sessions(
    db: AsyncSession, tenant_id: uuid.UUID, user_id: str, erasure_id: uuid.UUID
) -> tuple[int, int]:
    """Take every live session of the user: (sessions, messages in them). FOR UPDATE
    first: it waits for the writers holding KEY SHARE on a session (migration 0016)."""
    row = (
        await db.execute(
            sa.text(
                "WITH l AS (SELECT id FROM sessions WHERE tenant_id = :t AND user_id = :u "
                "AND erasure_id IS NULL ORDER BY id FOR UPDATE), "
                "u AS (UPDATE sessions SET erasure_id = :e WHERE tenant_id = :t "
                "AND id IN (SELECT id FROM l) RETURNING last_seq) "
                "SELECT count(*), coalesce(sum(last_seq), 0) FROM u"
            ),
            {"t": tenant_id, "u": user_id, "e": erasure_id},
        )
    ).one()
    return int(row[0]), int(row[1])


async def tombstone_session(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, erasure_id: uuid.UUID
) -> int | None:
    """Take one live session: its message count, None when it is not there (any more)."""
    n = await db.scalar(
        sa.text(
            "WITH l AS (SELECT id FROM sessions WHERE tenant_id = :t AND id = :s "
            "AND erasure_id IS NULL FOR UPDATE) "
            "UPDATE sessions SET erasure_id = :e WHERE tenant_id = :t "
            "AND id IN (SELECT id FROM l) RETURNING last_seq"
        ),
        {"t": tenant_id, "s": session_id, "e": erasure_id},
    )
    return None if n is None else int(n)


async def tier_size(db: AsyncSession, tenant_id: uuid.UUID, kind: str, subject: str) -> int:
    return int(
        await db.scalar(
            sa.text(
                "SELECT count(*) FROM memory_items WHERE tenant_id = :t AND scope_kind = :k "
                "AND scope_id = :sub"
            ),
            {"t": tenant_id, "k": kind, "sub": subject},
        )
        or 0
    )


async def agent_entries(db: AsyncSession, tenant_id: uuid.UUID, agent_id: str) -> int:
    return int(
        await db.scalar(
            sa.text(
                "SELECT count(*) FROM shared_memory_entries WHERE tenant_id = :t "
                "AND namespace = 'agent' AND scope_id = :a"
            ),
            {"t": tenant_id, "a": agent_id},
        )
        or 0
    )


async def next_session(
    db: AsyncSession, tenant_id: uuid.UUID, erasure_id: uuid.UUID
) -> tuple[uuid.UUID, int, int] | None:
    """A session the erasure still holds, with the seq range its messages still cover
    (exclusive low, inclusive high; None: all sessions gone)."""
    r = (
        await db.execute(
            sa.text(
                "SELECT id, greatest(last_seq, coalesce((SELECT max(m.seq) FROM messages m "
                "WHERE m.tenant_id = :t AND m.session_id = s.id), 0)) AS hi, "
                "coalesce((SELECT min(m.seq) FROM messages m WHERE m.tenant_id = :t "
                "AND m.session_id = s.id), 1) AS lo "
                "FROM sessions s WHERE s.tenant_id = :t AND s.erasure_id = :e "
                "ORDER BY s.created_at, s.id LIMIT 1"
            ),
            {"t": tenant_id, "e": erasure_id},
        )
    ).first()
    return None if r is None else (r.id, int(r.lo) - 1, int(r.hi))


async def complete(db: AsyncSession, tenant_id: uuid.UUID, erasure_id: uuid.UUID) -> None:
    """The end: the raw subject goes, the hash and the counts stay."""
    await db.execute(
        sa.text(
            "UPDATE erasures SET status = 'completed', subject = NULL, finished_at = now(), "
            "updated_at = now() WHERE tenant_id = :t AND id = :e AND status = 'running'"
        ),
        {"t": tenant_id, "e": erasure_id},
    )


async def stalled(
    db: AsyncSession, older_than_seconds: float, limit: int = 100
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Running erasures nobody has advanced lately, across tenants (the sweep's look)."""
    rows = await db.execute(
        sa.text(
            f"{FAN_OUT} SELECT tenant_id, id FROM erasures WHERE status = 'running' "
            "AND updated_at < now() - make_interval(secs => :age) ORDER BY updated_at LIMIT :n"
        ),
        {"age": older_than_seconds, "n": limit},
    )
    return [(r.tenant_id, r.id) for r in rows]

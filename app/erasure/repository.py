"""Erasure SQL, on an asyncpg connection (the caller's transaction). Every statement
names its tenant, except the recovery sweep (FAN_OUT). An erasure comes back as
`ErasureRow` (`app.models.erasure`), whose select list comes from the table model.

Each delete runs as `counted`: one statement that deletes and adds the number of deleted
rows to the receipt (`erasures.counts`), so the count commits with the deletion and a
runner killed between two statements leaves an exact receipt. The deletes are written
with named binds (`:t` tenant, `:e` erasure, ...) and numbered for asyncpg by
`app.core.pg.Params` when they are composed.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg

from app.core import pg
from app.core.partitions import FAN_OUT
from app.models.erasure import ERASURE_ROW_COLUMNS, ErasureRow

__all__ = ["ErasureRow"]

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


def _row(r: asyncpg.Record) -> ErasureRow:
    row = ErasureRow._make(r)
    return row._replace(counts=dict(row.counts or {}))


async def counted(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    erasure_id: uuid.UUID,
    kind: str,
    delete: str,
    params: dict[str, Any],
) -> int:
    """Run `delete` (a DELETE ... RETURNING 1) and add its row count to the receipt."""
    p = pg.Params(**params, t=tenant_id, e=erasure_id, kind=kind)
    n = await conn.fetchval(*p.sql(_COUNTED.format(delete=delete)))
    return int(n or 0)


async def run_combined(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    erasure_id: uuid.UUID,
    sql: str,
    params: dict[str, Any],
) -> None:
    await conn.execute(*pg.Params(**params, t=tenant_id, e=erasure_id).sql(sql))


_ADD_COUNT = """
UPDATE erasures SET counts = jsonb_set(counts, ARRAY[CAST($3 AS text)],
       CAST(CAST(coalesce((counts ->> CAST($3 AS text))::bigint, 0) + $4 AS text) AS jsonb)),
       updated_at = now()
WHERE tenant_id = $1 AND id = $2
"""


async def add_count(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, erasure_id: uuid.UUID, kind: str, n: int
) -> None:
    await conn.execute(_ADD_COUNT, tenant_id, erasure_id, kind, n)


_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"


async def lock_subject(conn: asyncpg.Connection, key: str) -> None:
    """The exclusive side of the write guards' lock (held to the end of the transaction)."""
    await conn.execute(_LOCK, key)


_INSERT = """
INSERT INTO erasures (tenant_id, id, kind, subject, subject_hash, status, requested_by,
                      requested_role, counts, started_at, finished_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, CAST('{}' AS jsonb), $8, NULL, $8)
"""


async def insert(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    erasure_id: uuid.UUID,
    kind: str,
    subject: str,
    subject_hash: str,
    requested_by: uuid.UUID | None,
    requested_role: str,
) -> None:
    """A running erasure with empty counts, started now."""
    await conn.execute(
        _INSERT,
        tenant_id,
        erasure_id,
        kind,
        subject,
        subject_hash,
        requested_by,
        requested_role,
        datetime.now(UTC),
    )


_COLUMNS = ", ".join(ERASURE_ROW_COLUMNS)
_GET = f"SELECT {_COLUMNS} FROM erasures WHERE tenant_id = $1 AND id = $2"


async def get(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, erasure_id: uuid.UUID
) -> ErasureRow | None:
    r = await conn.fetchrow(_GET, tenant_id, erasure_id)
    return None if r is None else _row(r)


_RUNNING_FOR = f"""
SELECT {_COLUMNS} FROM erasures
WHERE tenant_id = $1 AND kind = $2 AND subject = $3 AND status = 'running'
ORDER BY started_at LIMIT 1
"""


async def running_for(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, kind: str, subject: str
) -> ErasureRow | None:
    r = await conn.fetchrow(_RUNNING_FOR, tenant_id, kind, subject)
    return None if r is None else _row(r)


_LATEST = f"""
SELECT {_COLUMNS} FROM erasures WHERE tenant_id = $1
ORDER BY started_at DESC, id LIMIT $2
"""
_BY_HASH = f"""
SELECT {_COLUMNS} FROM erasures WHERE tenant_id = $1 AND subject_hash = $2
ORDER BY started_at DESC, id LIMIT $3
"""


async def latest(conn: asyncpg.Connection, tenant_id: uuid.UUID, limit: int) -> list[ErasureRow]:
    return [_row(r) for r in await conn.fetch(_LATEST, tenant_id, limit)]


async def by_hash(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, subject_hash: str, limit: int
) -> list[ErasureRow]:
    return [_row(r) for r in await conn.fetch(_BY_HASH, tenant_id, subject_hash, limit)]


_TOMBSTONE_USER = """
WITH l AS (SELECT id FROM sessions WHERE tenant_id = $1 AND user_id = $2
           AND erasure_id IS NULL ORDER BY id FOR UPDATE),
     u AS (UPDATE sessions SET erasure_id = $3 WHERE tenant_id = $1
           AND id IN (SELECT id FROM l) RETURNING last_seq)
SELECT count(*), coalesce(sum(last_seq), 0) FROM u
"""


async def tombstone_user_sessions(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, user_id: str, erasure_id: uuid.UUID
) -> tuple[int, int]:
    """Take every live session of the user: (sessions, messages in them). FOR UPDATE
    first: it waits for the writers holding KEY SHARE on a session (migration 0016)."""
    row = await conn.fetchrow(_TOMBSTONE_USER, tenant_id, user_id, erasure_id)
    assert row is not None
    return int(row[0]), int(row[1])


_TOMBSTONE_SESSION = """
WITH l AS (SELECT id FROM sessions WHERE tenant_id = $1 AND id = $2
           AND erasure_id IS NULL FOR UPDATE)
UPDATE sessions SET erasure_id = $3 WHERE tenant_id = $1
AND id IN (SELECT id FROM l) RETURNING last_seq
"""


async def tombstone_session(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, erasure_id: uuid.UUID
) -> int | None:
    """Take one live session: its message count, None when it is not there (any more)."""
    n = await conn.fetchval(_TOMBSTONE_SESSION, tenant_id, session_id, erasure_id)
    return None if n is None else int(n)


_TIER_SIZE = """
SELECT count(*) FROM memory_items WHERE tenant_id = $1 AND scope_kind = $2 AND scope_id = $3
"""
_AGENT_ENTRIES = """
SELECT count(*) FROM shared_memory_entries WHERE tenant_id = $1
AND namespace = 'agent' AND scope_id = $2
"""


async def tier_size(conn: asyncpg.Connection, tenant_id: uuid.UUID, kind: str, subject: str) -> int:
    return int(await conn.fetchval(_TIER_SIZE, tenant_id, kind, subject) or 0)


async def agent_entries(conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str) -> int:
    return int(await conn.fetchval(_AGENT_ENTRIES, tenant_id, agent_id) or 0)


_NEXT_SESSION = """
SELECT id, greatest(last_seq, coalesce((SELECT max(m.seq) FROM messages m
           WHERE m.tenant_id = $1 AND m.session_id = s.id), 0)) AS hi,
       coalesce((SELECT min(m.seq) FROM messages m WHERE m.tenant_id = $1
           AND m.session_id = s.id), 1) AS lo
FROM sessions s WHERE s.tenant_id = $1 AND s.erasure_id = $2
ORDER BY s.created_at, s.id LIMIT 1
"""


async def next_session(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, erasure_id: uuid.UUID
) -> tuple[uuid.UUID, int, int] | None:
    """A session the erasure still holds, with the seq range its messages still cover
    (exclusive low, inclusive high; None: all sessions gone)."""
    r = await conn.fetchrow(_NEXT_SESSION, tenant_id, erasure_id)
    return None if r is None else (r["id"], int(r["lo"]) - 1, int(r["hi"]))


_COMPLETE = """
UPDATE erasures SET status = 'completed', subject = NULL, finished_at = now(),
       updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND status = 'running'
"""


async def complete(conn: asyncpg.Connection, tenant_id: uuid.UUID, erasure_id: uuid.UUID) -> None:
    """The end: the raw subject goes, the hash and the counts stay."""
    await conn.execute(_COMPLETE, tenant_id, erasure_id)


_STALLED = f"""
{FAN_OUT} SELECT tenant_id, id FROM erasures WHERE status = 'running'
AND updated_at < now() - make_interval(secs => $1) ORDER BY updated_at LIMIT $2
"""


async def stalled(
    conn: asyncpg.Connection, older_than_seconds: float, limit: int = 100
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Running erasures nobody has advanced lately, across tenants (the sweep's look)."""
    rows = await conn.fetch(_STALLED, float(older_than_seconds), limit)
    return [(r["tenant_id"], r["id"]) for r in rows]

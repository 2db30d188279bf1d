"""SQL for shared memory. Every query is filtered by tenant, except the cleanup sweep.

"Live" = not expired, or still referenced by a message (a holder row): an expired entry is
never returned, even before the cleanup job has deleted it.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.partitions import FAN_OUT
from app.core.pg import dumps
from app.models.base import table_of
from app.models.session import Session
from app.models.shared_memory_entry import SharedMemoryEntry, SharedMemoryRefHolder

E = table_of(SharedMemoryEntry)
H = table_of(SharedMemoryRefHolder)
NEXT_VERSION = sa.func.nextval("shared_memory_version_seq")

HEAD_COLUMNS = [c for c in E.c if c.name != "value"]


@dataclass(frozen=True, slots=True)
class Addr:
    tenant_id: uuid.UUID
    namespace: str
    scope_id: str
    storage_key: str


def _held(tenant_id: Any) -> sa.ColumnElement[bool]:
    """A message holds the entry's reference (`tenant_id`: the tenant, named in the SQL)."""
    # correlated to the outer entry row by name: in an upsert's DO UPDATE SET, SQLAlchemy
    # would otherwise add shared_memory_entries to the subquery's FROM (any entry's holder)
    return sa.exists().where(
        H.c.tenant_id == tenant_id, H.c.entry_id == sa.literal_column("shared_memory_entries.id")
    )


def _live(now: datetime, tenant_id: Any) -> sa.ColumnElement[bool]:
    return sa.or_(E.c.expires_at.is_(None), E.c.expires_at > now, _held(tenant_id))


def _at(a: Addr) -> sa.ColumnElement[bool]:
    return sa.and_(
        E.c.tenant_id == a.tenant_id,
        E.c.namespace == a.namespace,
        E.c.scope_id == a.scope_id,
        E.c.storage_key == a.storage_key,
    )


async def get(db: AsyncSession, a: Addr, now: datetime, *, with_value: bool = True) -> Any:
    """The live entry at `a` (a Row), or None."""
    cols = list(E.c) if with_value else HEAD_COLUMNS
    res = await db.execute(
        sa.select(*cols, _held(a.tenant_id).label("held")).where(_at(a), _live(now, a.tenant_id))
    )
    return res.first()


async def get_by_ref(db: AsyncSession, tenant_id: uuid.UUID, ref_id: str, now: datetime) -> Any:
    res = await db.execute(
        sa.select(*E.c).where(
            E.c.tenant_id == tenant_id, E.c.ref_id == ref_id, _live(now, tenant_id)
        )
    )
    return res.first()


def _values(fields: dict[str, Any]) -> dict[str, Any]:
    return {**fields, "version": NEXT_VERSION, "updated_at": sa.func.now()}


async def upsert(
    db: AsyncSession, a: Addr, fields: dict[str, Any], now: datetime, *, only_if_dead: bool = False
) -> Any:
    """Insert or replace the entry; returns the row head, or None if `only_if_dead` and a
    live entry exists (create-only PUT)."""
    ins = pg_insert(E).values(
        id=uuid.uuid4(),
        tenant_id=a.tenant_id,
        namespace=a.namespace,
        scope_id=a.scope_id,
        storage_key=a.storage_key,
        **_values(fields),
    )
    # The reference id is the entry's identity for messages: a replace keeps it.
    update = {k: ins.excluded[k] for k in fields if k != "ref_id"} | {
        "version": NEXT_VERSION,
        "updated_at": sa.func.now(),
        # A dead (expired) row being overwritten is a new entry: restart created_at.
        "created_at": sa.case((_live(now, a.tenant_id), E.c.created_at), else_=sa.func.now()),
    }
    where = None if not only_if_dead else sa.not_(_live(now, a.tenant_id))
    stmt = ins.on_conflict_do_update(
        constraint="uq_shared_memory_entries_address", set_=update, where=where
    ).returning(*HEAD_COLUMNS)
    return (await db.execute(stmt)).first()


# A new entry at an address nobody holds (an offloaded tool result's fresh key), on an
# asyncpg connection: the message append's transaction (`app.shared_memory.offload`).
_CREATE = """
INSERT INTO shared_memory_entries (id, tenant_id, namespace, scope_id, storage_key, ref_id,
    value, content_type, metadata, sha256, compressed, size_bytes, stored_bytes,
    writer_agent_id, expires_at, version, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
        nextval('shared_memory_version_seq'), now(), now())
ON CONFLICT ON CONSTRAINT uq_shared_memory_entries_address DO NOTHING
RETURNING namespace, scope_id, storage_key, version, content_type, size_bytes, stored_bytes,
          compressed, sha256, ref_id, metadata, writer_agent_id, expires_at, created_at,
          updated_at
"""


async def create(conn: asyncpg.Connection, a: Addr, fields: dict[str, Any]) -> Any:
    """Insert a new entry at `a` (the `fields` of `upsert`); its head (attribute access,
    as `get` returns it), or None when `a` is taken."""
    row = await conn.fetchrow(
        _CREATE,
        uuid.uuid4(),
        a.tenant_id,
        a.namespace,
        a.scope_id,
        a.storage_key,
        fields["ref_id"],
        fields["value"],
        fields["content_type"],
        dumps(fields["metadata"]),
        fields["sha256"],
        fields["compressed"],
        fields["size_bytes"],
        fields["stored_bytes"],
        fields["writer_agent_id"],
        fields["expires_at"],
    )
    return None if row is None else SimpleNamespace(**dict(row))


async def update_if_version(
    db: AsyncSession, a: Addr, expected: int, fields: dict[str, Any], now: datetime
) -> Any:
    """Compare-and-set: replace only if the live entry is still at `expected`."""
    stmt = (
        sa.update(E)
        .where(_at(a), E.c.version == expected, _live(now, a.tenant_id))
        .values(**_values(fields))
        .returning(*HEAD_COLUMNS)
    )
    return (await db.execute(stmt)).first()


async def delete(db: AsyncSession, a: Addr, now: datetime, expected: int | None) -> Any:
    """Delete the live, unreferenced entry (at `expected` if given); returns its head."""
    conds = [_at(a), _live(now, a.tenant_id), sa.not_(_held(a.tenant_id))]
    if expected is not None:
        conds.append(E.c.version == expected)
    stmt = sa.delete(E).where(*conds).returning(E.c.id, E.c.version)
    return (await db.execute(stmt)).first()


async def next_version(db: AsyncSession) -> int:
    return int((await db.execute(sa.select(NEXT_VERSION))).scalar_one())


async def list_keys(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    namespace: str,
    scope_id: str,
    prefix: str,
    after: str | None,
    limit: int,
    now: datetime,
) -> list[Any]:
    """Live entries whose storage key starts with `prefix`, in storage-key order."""
    conds = [
        E.c.tenant_id == tenant_id,
        E.c.namespace == namespace,
        E.c.scope_id == scope_id,
        _live(now, tenant_id),
    ]
    if prefix:
        conds.append(sa.func.starts_with(E.c.storage_key, prefix))
    key_c = E.c.storage_key.collate("C")
    if after is not None:
        conds.append(key_c > after)
    stmt = (
        sa.select(
            E.c.storage_key,
            E.c.version,
            E.c.size_bytes,
            E.c.content_type,
            E.c.expires_at,
            E.c.updated_at,
            E.c.sha256,
            E.c.writer_agent_id,
        )
        .where(*conds)
        .order_by(key_c)
        .limit(limit)
    )
    return list((await db.execute(stmt)).all())


async def namespace_totals(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    agent_id: str | None,
    now: datetime,
    *,
    own_sessions_only: bool,
) -> list[Any]:
    """(namespace, keys, bytes, stored_bytes) of live entries the caller may see.

    `own_sessions_only` (agent keys): the session namespace counts only the scopes of the
    agent's own sessions (the visibility rule of `app.sessions.access`)."""
    conds = [E.c.tenant_id == tenant_id, _live(now, tenant_id)]
    # The agent namespace counts only the caller's own scope (none without an agent).
    conds.append(sa.or_(E.c.namespace != "agent", E.c.scope_id == (agent_id or "")))
    if own_sessions_only:
        S = table_of(Session)
        own = sa.select(sa.cast(S.c.id, sa.Text)).where(
            S.c.tenant_id == tenant_id, S.c.agent_id == (agent_id or "")
        )
        conds.append(sa.or_(E.c.namespace != "session", E.c.scope_id.in_(own)))
    stmt = (
        sa.select(
            E.c.namespace,
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(E.c.size_bytes), 0),
            sa.func.coalesce(sa.func.sum(E.c.stored_bytes), 0),
        )
        .where(*conds)
        .group_by(E.c.namespace)
    )
    return list((await db.execute(stmt)).all())


_ENTRY_IDS = """
SELECT ref_id, id FROM shared_memory_entries WHERE tenant_id = $1 AND ref_id = ANY($2::text[])
"""
_ADD_HOLDERS = """
INSERT INTO shared_memory_ref_holders (entry_id, session_id, seq, tenant_id)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::uuid[])
ON CONFLICT DO NOTHING
"""


async def hold(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    held: list[tuple[int, str]],
) -> None:
    """Record that the messages `held` ((seq, ref_id), of `session_id`) hold the entries
    with those reference ids (of `tenant_id`; unknown ids are skipped), on an asyncpg
    connection (the message append's transaction)."""
    ids = dict(await conn.fetch(_ENTRY_IDS, tenant_id, [r for _, r in held]))
    rows = [(ids[ref], seq) for seq, ref in held if ref in ids]
    if rows:
        await conn.execute(
            _ADD_HOLDERS,
            [e for e, _ in rows],
            [session_id] * len(rows),
            [s for _, s in rows],
            [tenant_id] * len(rows),
        )


async def delete_expired(db: AsyncSession, now: datetime, limit: int) -> list[Any]:
    """Delete up to `limit` expired, unreferenced entries of any tenant (maintenance sweep)."""
    victims = (
        sa.select(E.c.tenant_id, E.c.id)
        .where(E.c.expires_at <= now, sa.not_(_held(E.c.tenant_id)))
        .order_by(E.c.expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .subquery()
    )
    stmt = (
        sa.delete(E)
        .prefix_with(FAN_OUT)
        .where(sa.tuple_(E.c.tenant_id, E.c.id).in_(sa.select(victims.c.tenant_id, victims.c.id)))
        .returning(E.c.tenant_id, E.c.namespace, E.c.scope_id, E.c.storage_key, E.c.version)
    )
    return list((await db.execute(stmt)).all())

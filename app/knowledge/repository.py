"""SQL for memory items and learned versions. Every query filters by tenant.

The filter AST of ``app.knowledge.filters`` is compiled here to SQLAlchemy, so
filtering, ordering and paging all run in PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from app.core import pg
from app.knowledge.filters import Condition, OrderBy
from app.knowledge.scopes import Scope, parse_scope
from app.models.base import table_of
from app.models.learned import LearnedHead, LearnedVersion
from app.models.memory_item import MEMORY_ITEM_ROW_COLUMNS, MemoryItem, MemoryItemRow
from app.users import access as users_access

M = table_of(MemoryItem).c
_H = table_of(LearnedHead)

# A plain row of any width (``Result.all()``): attribute access by column name.
AnyRow = sa.Row[*tuple[Any, ...]]

_COLUMNS: dict[str, Any] = {
    "id": M.id,
    "kind": M.kind,
    "source": M.source,
    "text": M.text,
    "tags": M.tags,
    "importance": M.importance,
    "token_cost": M.token_cost,
    "created_at": M.created_at,
    "updated_at": M.updated_at,
}


def scope_clause(scope: Scope) -> sa.ColumnElement[bool]:
    """Items of exactly one scope (the unresolved ``agent`` / ``user`` scope: that tier,
    which `readable` narrows to what the caller may see)."""
    if scope.kind in ("agent", "user") and scope.id is None:
        return M.scope_kind == scope.kind
    return sa.and_(M.scope_kind == scope.kind, M.scope_id == scope.storage_id)


def readable(
    tenant_id: uuid.UUID,
    agent_id: str | None,
    *,
    include_invalidated: bool = True,
    every_user: bool = False,
) -> list[sa.ColumnElement[bool]]:
    """The items a caller may read: its tenant's, except other agents' ``agent`` tiers
    (a caller acting for no agent sees no agent tier) and the ``user`` tiers of people
    the caller may not see (`app.users.access`: ``every_user`` for service and admin
    keys, else only users ``agent_id`` has a session with). With ``include_invalidated``
    False, superseded facts are left out too. Every item read goes through this."""
    clauses: list[sa.ColumnElement[bool]] = [M.tenant_id == tenant_id]
    if agent_id is None:
        clauses.append(M.scope_kind != "agent")
    else:
        clauses.append(sa.or_(M.scope_kind != "agent", M.scope_id == agent_id))
    if not every_user:
        clauses.append(
            sa.or_(
                M.scope_kind != "user",
                users_access.agent_knows_user(tenant_id, agent_id, M.scope_id),
            )
        )
    if not include_invalidated:
        clauses.append(M.invalid_at.is_(None))
    return clauses


def scope_sql(p: pg.Params, scope: Scope, m: str = "m") -> str:
    """`scope_clause` as SQL on alias `m`, its values added to `p`."""
    kind = p.add(scope.kind, "scope_kind")
    if scope.kind in ("agent", "user") and scope.id is None:
        return f"{m}.scope_kind = {kind}"
    return f"({m}.scope_kind = {kind} AND {m}.scope_id = {p.add(scope.storage_id, 'scope_id')})"


def readable_sql(
    p: pg.Params,
    tenant_id: uuid.UUID,
    agent_id: str | None,
    *,
    include_invalidated: bool = True,
    every_user: bool = False,
    m: str = "m",
) -> str:
    """`readable` as SQL on alias `m` (memory_items), its values added to `p`: the one
    rule for every item read, written once for statements composed as text."""
    tenant = p.add(tenant_id, "tenant_id")
    agent = None if agent_id is None else p.add(agent_id, "agent_id")
    parts = [f"{m}.tenant_id = {tenant}"]
    if agent is None:
        parts.append(f"{m}.scope_kind <> 'agent'")
    else:
        parts.append(f"({m}.scope_kind <> 'agent' OR {m}.scope_id = {agent})")
    if not every_user:
        knows = users_access.knows_user_sql(tenant, agent, f"{m}.scope_id")
        parts.append(f"({m}.scope_kind <> 'user' OR {knows})")
    if not include_invalidated:
        parts.append(f"{m}.invalid_at IS NULL")
    return " AND ".join(parts)


def valid_at_sql(p: pg.Params, tenant_id: uuid.UUID, at: datetime, m: str = "m") -> str:
    """`app.knowledge.asof.valid_at` as SQL on alias `m`, its values added to `p`: taken
    effect by `at` (the earliest version's `valid_from`, else the item's, else its
    creation) and not invalid yet."""
    tenant, when = p.add(tenant_id, "tenant_id"), p.add(at, "at")
    earliest = (
        f"(SELECT min(v.valid_from) FROM memory_item_versions v "
        f"WHERE v.tenant_id = {tenant} AND v.item_id = {m}.id)"
    )
    return (
        f"coalesce(least({m}.valid_from, {earliest}), {m}.created_at) <= {when} "
        f"AND ({m}.invalid_at IS NULL OR {m}.invalid_at > {when})"
    )


# The forms taking an asyncpg connection beside a session (the facts domain's SQL);
# knowledge's own move to asyncpg replaces the session forms.
ITEM_COLUMNS = ", ".join(f"m.{c}" for c in MEMORY_ITEM_ROW_COLUMNS)


def compile_condition(c: Condition) -> sa.ColumnElement[bool]:
    """One AST condition as a SQL boolean expression."""
    if c.field == "scope":
        scopes = [parse_scope(v) for v in (c.value if isinstance(c.value, tuple) else (c.value,))]
        any_of = sa.or_(*(scope_clause(s) for s in scopes))
        return any_of if c.op in ("eq", "in") else sa.not_(any_of)
    column = _COLUMNS[c.field]
    op, v = c.op, c.value
    if op == "any":
        return column.overlap(sa.cast(list(v), column.type))  # tags && ARRAY[...] (GIN)
    if op == "none":
        return sa.not_(column.overlap(sa.cast(list(v), column.type)))
    if op == "is_null":
        return column.is_(None)
    if op == "not_null":
        return column.is_not(None)
    if op == "in":
        return column.in_(list(v))
    if op == "nin":
        return column.not_in(list(v))
    return {
        "eq": column.__eq__,
        "ne": column.__ne__,
        "gt": column.__gt__,
        "gte": column.__ge__,
        "lt": column.__lt__,
        "lte": column.__le__,
    }[op](v)


def _where(
    tenant_id: uuid.UUID, conditions: Sequence[Condition], scope: Scope | None = None
) -> list[sa.ColumnElement[bool]]:
    clauses = [M.tenant_id == tenant_id, *(compile_condition(c) for c in conditions)]
    if scope is not None:
        clauses.append(scope_clause(scope))
    return clauses


async def add(db: AsyncSession, item: MemoryItem) -> MemoryItem:
    db.add(item)
    await db.flush()
    return item


async def get(
    db: AsyncSession | asyncpg.Connection,
    tenant_id: uuid.UUID,
    item_id: uuid.UUID,
    *,
    agent_id: str | None,
    for_update: bool = False,
    every_user: bool = False,
) -> MemoryItem | None:
    if isinstance(db, asyncpg.Connection):
        p = pg.Params()
        where = readable_sql(p, tenant_id, agent_id, every_user=every_user)
        lock = " FOR UPDATE" if for_update else ""
        ident = p.add(item_id, "id")
        sql = f"SELECT {ITEM_COLUMNS} FROM memory_items m WHERE {where} AND m.id = {ident}{lock}"
        row = await db.fetchrow(*p.sql(sql))
        return None if row is None else MemoryItemRow._make(row)  # type: ignore[return-value]
    q = sa.select(MemoryItem).where(
        *readable(tenant_id, agent_id, every_user=every_user), M.id == item_id
    )
    if for_update:
        q = q.with_for_update()
    return (await db.execute(q)).scalar_one_or_none()


async def get_rows(
    db: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> list[AnyRow]:
    """Full items as plain rows (no ORM identity map: cheaper for read-only rendering)."""
    if not ids:
        return []
    result = await db.execute(sa.select(*M).where(M.tenant_id == tenant_id, M.id.in_(list(ids))))
    return list(result.all())


async def get_many(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    ids: Sequence[uuid.UUID],
    *,
    agent_id: str | None,
    every_user: bool = False,
) -> list[MemoryItem]:
    if not ids:
        return []
    result = await db.execute(
        sa.select(MemoryItem).where(
            *readable(tenant_id, agent_id, every_user=every_user), M.id.in_(list(ids))
        )
    )
    return list(result.scalars())


async def delete(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    item_id: uuid.UUID,
    *,
    agent_id: str | None,
    every_user: bool = False,
) -> AnyRow | None:
    """The deleted item (every column, for its `delete` version), or None."""
    result = await db.execute(
        sa.delete(MemoryItem)
        .where(*readable(tenant_id, agent_id, every_user=every_user), M.id == item_id)
        .returning(*M)
    )
    return result.first()


async def query(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    conditions: Sequence[Condition],
    order: OrderBy,
    limit: int,
    after: tuple[Any, uuid.UUID] | None,
    *,
    agent_id: str | None,
    include_invalidated: bool = False,
    valid: sa.ColumnElement[bool] | None = None,
    every_user: bool = False,
) -> list[MemoryItem]:
    """One page of matching items; ``after`` is the keyset (order value, id) of the last row.
    ``valid``: only items valid by it (an `as_of`), invalidated or not now."""
    column = _COLUMNS[order.field]
    q = sa.select(MemoryItem).where(
        *_where(tenant_id, conditions),
        *readable(
            tenant_id,
            agent_id,
            include_invalidated=include_invalidated or valid is not None,
            every_user=every_user,
        ),
        *([valid] if valid is not None else []),
    )
    if after is not None:
        key, last = (
            sa.tuple_(column, M.id),
            sa.tuple_(sa.literal(after[0], column.type), sa.literal(after[1], M.id.type)),
        )
        q = q.where(key < last if order.descending else key > last)
    direction = sa.desc if order.descending else sa.asc
    q = q.order_by(direction(column), direction(M.id)).limit(limit)
    return list((await db.execute(q)).scalars())


async def lock_scope(
    db: AsyncSession | asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope
) -> None:
    """Serialise writers of one scope for this transaction (eviction must not race)."""
    key = f"knowledge:{tenant_id}:{scope}"
    if isinstance(db, asyncpg.Connection):
        await db.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key)
        return
    await db.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(key, 0))))


async def count(db: AsyncSession | asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope) -> int:
    if isinstance(db, asyncpg.Connection):
        p = pg.Params(tenant_id=tenant_id)
        where = f"m.tenant_id = :tenant_id AND {scope_sql(p, scope)}"
        sql = f"SELECT count(*) FROM memory_items m WHERE {where}"
        return int(await db.fetchval(*p.sql(sql)))
    result = await db.execute(
        sa.select(sa.func.count())
        .select_from(table_of(MemoryItem))
        .where(*_where(tenant_id, (), scope))
    )
    return int(result.scalar_one())


async def evict_lowest(
    db: AsyncSession | asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope, n: int
) -> list[AnyRow]:
    """Delete the ``n`` lowest-importance, oldest items (ties by id), as eviction.py orders;
    the deleted rows."""
    if n <= 0:
        return []
    if isinstance(db, asyncpg.Connection):
        p = pg.Params(tenant_id=tenant_id)
        victims = (
            f"SELECT m.id FROM memory_items m WHERE m.tenant_id = :tenant_id AND "
            f"{scope_sql(p, scope)} ORDER BY m.importance, m.created_at, m.id LIMIT {p.add(n, 'n')}"
        )
        sql = (
            f"DELETE FROM memory_items m WHERE m.tenant_id = :tenant_id AND m.id IN ({victims}) "
            f"RETURNING {ITEM_COLUMNS}"
        )
        return [MemoryItemRow._make(r) for r in await db.fetch(*p.sql(sql))]  # type: ignore[misc]
    victims = (
        sa.select(M.id)
        .where(*_where(tenant_id, (), scope))
        .order_by(M.importance.asc(), M.created_at.asc(), M.id.asc())
        .limit(n)
    )
    result = await db.execute(
        sa.delete(MemoryItem)
        .where(M.tenant_id == tenant_id, M.id.in_(victims.scalar_subquery()))
        .returning(*M)
    )
    return list(result.all())


async def clear(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    conditions: Sequence[Condition] = (),
    keep: Sequence[uuid.UUID] = (),
) -> list[AnyRow]:
    """Delete the scope's (matching) items except ``keep``; the deleted rows."""
    q = sa.delete(MemoryItem).where(*_where(tenant_id, conditions, scope))
    if keep:
        q = q.where(M.id.not_in(list(keep)))
    return list((await db.execute(q.returning(*M))).all())


async def move(
    db: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID], to: Scope, now: datetime
) -> int:
    """Move items to another scope (promotion keeps the id)."""
    if not ids:
        return 0
    result = await db.execute(
        sa.update(MemoryItem)
        .where(M.tenant_id == tenant_id, M.id.in_(list(ids)))
        .values(scope_kind=to.kind, scope_id=to.storage_id, updated_at=now)
        .returning(M.id)
    )
    return len(result.all())


def _valid(valid: sa.ColumnElement[bool] | None) -> sa.ColumnElement[bool]:
    """Items valid now, or as `valid` says (a package `as_of`)."""
    return M.invalid_at.is_(None) if valid is None else valid


async def tier_totals(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scopes: Sequence[Scope],
    conditions: Sequence[Condition],
    valid: sa.ColumnElement[bool] | None = None,
) -> dict[str, tuple[int, int]]:
    """scope kind -> (count, sum of token_cost) of the matching items, in one query.

    ``scopes`` holds at most one scope per kind (a package's task, project and global).
    """
    if not scopes:
        return {}
    q = (
        sa.select(M.scope_kind, sa.func.count(), sa.func.coalesce(sa.func.sum(M.token_cost), 0))
        .where(
            *_where(tenant_id, conditions),
            sa.or_(*(scope_clause(s) for s in scopes)),
            _valid(valid),
        )
        .group_by(M.scope_kind)
    )
    return {kind: (int(n), int(tokens)) for kind, n, tokens in (await db.execute(q)).all()}


async def tier_candidates(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scopes: Sequence[tuple[Scope, int]],
    conditions: Sequence[Condition],
    *,
    limit: int,
    valid: sa.ColumnElement[bool] | None = None,
) -> list[AnyRow]:
    """Light rows (id, scope_kind, importance, created_at, token_cost) in one query.

    Per (scope, max_cost): the items that could fit (token_cost <= max_cost), the best
    ``limit`` of each scope in package rank order (importance desc, newest first, id).
    """
    if not scopes:
        return []
    fits = sa.or_(*(sa.and_(scope_clause(s), M.token_cost <= cap) for s, cap in scopes))
    rank = (
        sa.func.row_number()
        .over(
            partition_by=M.scope_kind,
            order_by=(M.importance.desc(), M.created_at.desc(), M.id.asc()),
        )
        .label("rn")
    )
    inner = (
        sa.select(M.id, M.scope_kind, M.importance, M.created_at, M.token_cost, rank)
        .where(*_where(tenant_id, conditions), fits, _valid(valid))
        .subquery()
    )
    q = sa.select(
        inner.c.id, inner.c.scope_kind, inner.c.importance, inner.c.created_at, inner.c.token_cost
    ).where(inner.c.rn <= limit)
    return list((await db.execute(q)).all())


async def head_tail_candidates(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    conditions: Sequence[Condition],
    *,
    max_cost: int,
    n: int,
    valid: sa.ColumnElement[bool] | None = None,
) -> list[AnyRow]:
    """The ``n`` oldest and ``n`` newest items of a scope that could fit ``max_cost``."""
    base = sa.select(M.id, M.scope_kind, M.importance, M.created_at, M.token_cost).where(
        *_where(tenant_id, conditions, scope), M.token_cost <= max_cost, _valid(valid)
    )
    rows: dict[uuid.UUID, AnyRow] = {}
    for order in ((M.created_at.asc(), M.id.asc()), (M.created_at.desc(), M.id.desc())):
        for r in (await db.execute(base.order_by(*order).limit(n))).all():
            rows[r.id] = r
    return list(rows.values())


# --- learned layer -----------------------------------------------------------------------


async def allocate_learned_version(db: AsyncSession, tenant_id: uuid.UUID, agent_id: str) -> int:
    """Atomically take the next version number for an agent and make it active."""
    ins = pg_insert(LearnedHead).values(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        agent_id=agent_id,
        active_version=1,
        latest_version=1,
        updated_at=sa.func.now(),
    )
    h = _H.c
    # the inserted row's time, not now(): Citus calls no function but immutable ones in
    # an upsert's DO UPDATE
    stmt = ins.on_conflict_do_update(
        constraint="uq_learned_heads_agent",
        set_={
            "latest_version": h.latest_version + 1,
            "active_version": h.latest_version + 1,
            "updated_at": ins.excluded.updated_at,
        },
    ).returning(h.latest_version)
    return int((await db.execute(stmt)).scalar_one())


async def add_learned_version(db: AsyncSession, row: LearnedVersion) -> LearnedVersion:
    db.add(row)
    await db.flush()
    return row


async def get_learned_head(
    db: AsyncSession, tenant_id: uuid.UUID, agent_id: str, *, for_update: bool = False
) -> LearnedHead | None:
    q = sa.select(LearnedHead).where(
        col(LearnedHead.tenant_id) == tenant_id, col(LearnedHead.agent_id) == agent_id
    )
    if for_update:
        q = q.with_for_update()
    return (await db.execute(q)).scalar_one_or_none()


async def get_learned_version(
    db: AsyncSession, tenant_id: uuid.UUID, agent_id: str, version: int
) -> LearnedVersion | None:
    result = await db.execute(
        sa.select(LearnedVersion).where(
            col(LearnedVersion.tenant_id) == tenant_id,
            col(LearnedVersion.agent_id) == agent_id,
            col(LearnedVersion.version) == version,
        )
    )
    return result.scalar_one_or_none()


async def learned_version_numbers(
    db: AsyncSession, tenant_id: uuid.UUID, agent_id: str
) -> list[int]:
    result = await db.execute(
        sa.select(col(LearnedVersion.version)).where(
            col(LearnedVersion.tenant_id) == tenant_id, col(LearnedVersion.agent_id) == agent_id
        )
    )
    return [int(v) for v in result.scalars()]


async def get_active_learned(
    db: AsyncSession, tenant_id: uuid.UUID, agent_id: str
) -> LearnedVersion | None:
    """The active version in one query (used on the context path)."""
    h = _H.c
    result = await db.execute(
        sa.select(LearnedVersion)
        .join(
            _H,
            sa.and_(
                h.tenant_id == col(LearnedVersion.tenant_id),
                h.agent_id == col(LearnedVersion.agent_id),
                h.active_version == col(LearnedVersion.version),
            ),
        )
        .where(
            h.tenant_id == tenant_id,
            h.agent_id == agent_id,
            col(LearnedVersion.tenant_id) == tenant_id,
        )
    )
    return result.scalar_one_or_none()

"""The ledger's SQL (`llm_usage`, `tenant_budgets`) on asyncpg connections: the meter's
writes and budget reads (`LedgerStore`, on a connection of its own), the report, the
budgets' administration (the route's connection) and the cron pass's reads. Every
statement filters by tenant but the cron pass's look across tenants (FAN_OUT)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import NamedTuple

import asyncpg

from app.core.partitions import FAN_OUT
from app.core.pg import positional
from app.llm.usage import UsageRow
from app.models.base import row_columns
from app.models.llm_usage import BUDGET_ROW_COLUMNS, BudgetRow, LlmUsage

Connect = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]

# The ledger's columns, in `UsageRow`'s order (from the model: a field it lacks fails here).
_USAGE_COLUMNS = row_columns(UsageRow._fields, LlmUsage)
_INSERT = (
    f"INSERT INTO llm_usage ({', '.join(_USAGE_COLUMNS)}) "
    f"VALUES ({', '.join(f'${i}' for i in range(1, len(_USAGE_COLUMNS) + 1))})"
)
_TENANT = UsageRow._fields.index("tenant_id")
# agent and user come from the call's session when the call site did not name them
_SESSIONS_OF = """
SELECT id, agent_id, user_id FROM sessions WHERE tenant_id = $1 AND id = ANY($2::uuid[])
"""

_BUDGET = """
SELECT (SELECT daily_tokens FROM tenant_budgets WHERE tenant_id = $1) AS own,
       EXISTS (SELECT 1 FROM tenant_budgets WHERE tenant_id = $1) AS has_own,
       (SELECT COALESCE(SUM(input_tokens + output_tokens), 0)
          FROM llm_usage WHERE tenant_id = $1 AND at >= $2) AS used
"""


def by_tenant(rows: Sequence[UsageRow]) -> dict[uuid.UUID, list[UsageRow]]:
    """A batch split by tenant, in the batch's order."""
    out: dict[uuid.UUID, list[UsageRow]] = {}
    for r in rows:
        out.setdefault(r.tenant_id, []).append(r)
    return out


def attributed(
    rows: Sequence[UsageRow], sessions: dict[uuid.UUID, tuple[str | None, str | None]]
) -> list[UsageRow]:
    """Each row with the agent and user of its session (`sessions`: id -> (agent, user))
    where the call site named none."""
    out = []
    for r in rows:
        found = sessions.get(r.session_id) if r.session_id is not None else None
        if found is not None and (r.agent_id is None or r.user_id is None):
            r = r._replace(
                agent_id=found[0] if r.agent_id is None else r.agent_id,
                user_id=found[1] if r.user_id is None else r.user_id,
            )
        out.append(r)
    return out


async def insert(conn: asyncpg.Connection, rows: Sequence[UsageRow]) -> None:
    """Write a batch: per tenant, one read of its sessions and its rows' inserts, each
    statement on the tenant's shard (the caller's transaction)."""
    for tenant_id, group in by_tenant(rows).items():
        ids = list({r.session_id for r in group if r.session_id is not None})
        named = {}
        if ids and any(r.agent_id is None or r.user_id is None for r in group):
            found = await conn.fetch(_SESSIONS_OF, tenant_id, ids)
            named = {s["id"]: (s["agent_id"], s["user_id"]) for s in found}
        await conn.executemany(_INSERT, [tuple(r) for r in attributed(group, named)])


class LedgerStore:
    """`app.llm.usage.UsageStore` on connections from `connect` (the routes' pool of the
    API, `AppState.db_connection`, and the worker's: the meter's of either process)."""

    def __init__(self, connect: Connect) -> None:
        self.connect = connect

    async def insert(self, rows: Sequence[UsageRow]) -> None:
        async with self.connect() as conn, conn.transaction():
            await insert(conn, rows)

    async def budget(self, tenant_id: uuid.UUID, since: datetime) -> tuple[int | None, bool, int]:
        async with self.connect() as conn:
            row = await conn.fetchrow(_BUDGET, tenant_id, since)
        assert row is not None
        return row["own"], bool(row["has_own"]), int(row["used"])


# --- the report -----------------------------------------------------------------------


class GroupRow(NamedTuple):
    """One group of the report: its key (None for the total) and its sums."""

    key: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    failed: int
    latency_ms: int


GROUPS: dict[str, str] = {
    "day": "to_char(date_trunc('day', at AT TIME ZONE 'UTC'), 'YYYY-MM-DD')",
    "purpose": "purpose",
    "model": "model",
    "session": "CAST(session_id AS text)",
    "user": "user_id",
    "agent": "agent_id",
}
_SUMS = """COUNT(*) AS calls,
       COALESCE(SUM(input_tokens), 0) AS input_tokens,
       COALESCE(SUM(output_tokens), 0) AS output_tokens,
       COUNT(*) FILTER (WHERE outcome <> 'ok') AS failed,
       COALESCE(SUM(latency_ms), 0) AS latency_ms"""
_RANGE = """tenant_id = :t AND at >= :since AND at < :until
  AND (CAST(:a AS varchar) IS NULL OR agent_id = CAST(:a AS varchar))"""
# one statement per grouping, built once: (SQL with $n, the parameters' names in order)
_REPORT = {
    name: positional(
        f"SELECT CAST({expr} AS text) AS key, {_SUMS} FROM llm_usage WHERE {_RANGE} "
        "GROUP BY 1 ORDER BY 1 NULLS LAST LIMIT :limit"
    )
    for name, expr in GROUPS.items()
}
_REPORT["total"] = positional(
    f"SELECT CAST(NULL AS text) AS key, {_SUMS} FROM llm_usage WHERE {_RANGE} "
    "AND CAST(:limit AS int) > 0"
)


async def report(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    group_by: str,
    since: datetime,
    until: datetime,
    limit: int,
    agent_id: str | None = None,
) -> list[GroupRow]:
    """The tenant's calls in [since, until) (an agent's only, with `agent_id`), grouped
    (`GROUPS`), at most `limit` groups."""
    sql, names = _REPORT[group_by]
    params = {"t": tenant_id, "since": since, "until": until, "limit": limit, "a": agent_id}
    return [GroupRow._make(r) for r in await conn.fetch(sql, *(params[n] for n in names))]


# --- budgets --------------------------------------------------------------------------

_GET_BUDGET = f"SELECT {', '.join(BUDGET_ROW_COLUMNS)} FROM tenant_budgets WHERE tenant_id = $1"
# the update's time is the inserted row's (Citus calls no function but immutable ones in
# DO UPDATE)
_SET_BUDGET = """
INSERT INTO tenant_budgets (tenant_id, daily_tokens, updated_at) VALUES ($1, $2, now())
ON CONFLICT (tenant_id) DO UPDATE SET daily_tokens = EXCLUDED.daily_tokens,
updated_at = EXCLUDED.updated_at
"""
_CLEAR_BUDGET = "DELETE FROM tenant_budgets WHERE tenant_id = $1"
_USED_SINCE = """
SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM llm_usage
WHERE tenant_id = $1 AND at >= $2
"""
_WAITING = "SELECT session_id FROM fact_extractions WHERE tenant_id = $1 AND skipped = 'budget'"
_TENANTS_WAITING = (
    f"{FAN_OUT} SELECT DISTINCT tenant_id FROM fact_extractions WHERE skipped = 'budget' LIMIT $1"
)


async def get_budget(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> BudgetRow | None:
    """The tenant's own budget row (None: the default applies)."""
    r = await conn.fetchrow(_GET_BUDGET, tenant_id)
    return None if r is None else BudgetRow._make(r)


async def set_budget(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, daily_tokens: int | None
) -> None:
    await conn.execute(_SET_BUDGET, tenant_id, daily_tokens)


async def clear_budget(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> None:
    await conn.execute(_CLEAR_BUDGET, tenant_id)


async def used_since(conn: asyncpg.Connection, tenant_id: uuid.UUID, since: datetime) -> int:
    return int(await conn.fetchval(_USED_SINCE, tenant_id, since))


async def waiting_extractions(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> list[uuid.UUID]:
    """The tenant's sessions whose fact extraction waits for the budget
    (`fact_extractions.skipped = 'budget'`, app/facts/tasks.py)."""
    return [r[0] for r in await conn.fetch(_WAITING, tenant_id)]


async def tenants_waiting(conn: asyncpg.Connection, limit: int) -> list[uuid.UUID]:
    """Tenants with an extraction waiting for the budget, across tenants (the cron pass)."""
    return [r[0] for r in await conn.fetch(_TENANTS_WAITING, limit)]


_TENANT_EXISTS = "SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)"


async def tenant_exists(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> bool:
    return bool(await conn.fetchval(_TENANT_EXISTS, tenant_id))

"""The ledger's SQL (`llm_usage`, `tenant_budgets`): the meter's writes and budget reads
on the process's engine, the report, the budgets' administration and erasure's blanking.
Every statement filters by tenant."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from app.core.partitions import FAN_OUT
from app.llm.usage import UsageRow

# agent and user come from the call's session when the call site did not name them. One
# row per run, of one tenant; marked fan-out because Citus plans an INSERT ... SELECT over
# parameters joined to `sessions` on the coordinator (a ledger write, off every request's
# path, batched: routing it to one shard is a follow-up)
_INSERT = sa.text(
    f"""
    INSERT {FAN_OUT} INTO llm_usage (tenant_id, id, at, agent_id, user_id, session_id, purpose,
                           provider, model, input_tokens, output_tokens, latency_ms, outcome)
    SELECT v.tenant_id, v.id, v.at, COALESCE(v.agent_id, s.agent_id),
           COALESCE(v.user_id, s.user_id), v.session_id, v.purpose, v.provider, v.model,
           v.input_tokens, v.output_tokens, v.latency_ms, v.outcome
    FROM (SELECT CAST(:tenant_id AS uuid) AS tenant_id, CAST(:id AS uuid) AS id,
                 CAST(:at AS timestamptz) AS at, CAST(:agent_id AS varchar) AS agent_id,
                 CAST(:user_id AS varchar) AS user_id, CAST(:session_id AS uuid) AS session_id,
                 CAST(:purpose AS varchar) AS purpose, CAST(:provider AS varchar) AS provider,
                 CAST(:model AS varchar) AS model, CAST(:input_tokens AS int) AS input_tokens,
                 CAST(:output_tokens AS int) AS output_tokens,
                 CAST(:latency_ms AS int) AS latency_ms, CAST(:outcome AS varchar) AS outcome
         ) v
    LEFT JOIN sessions s ON s.tenant_id = v.tenant_id AND s.id = v.session_id
    """
)

_BUDGET = sa.text(
    """
    SELECT (SELECT daily_tokens FROM tenant_budgets WHERE tenant_id = :t) AS own,
           EXISTS (SELECT 1 FROM tenant_budgets WHERE tenant_id = :t) AS has_own,
           (SELECT COALESCE(SUM(input_tokens + output_tokens), 0)
              FROM llm_usage WHERE tenant_id = :t AND at >= :since) AS used
    """
)


class EngineStore:
    """`app.llm.usage.UsageStore` on a SQLAlchemy engine (the API's or the worker's)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def insert(self, rows: Sequence[UsageRow]) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(_INSERT, [r._asdict() for r in rows])

    async def budget(self, tenant_id: uuid.UUID, since: datetime) -> tuple[int | None, bool, int]:
        async with self.engine.connect() as conn:
            row = (await conn.execute(_BUDGET, {"t": tenant_id, "since": since})).one()
        return row.own, bool(row.has_own), int(row.used)


# --- the report -----------------------------------------------------------------------

GROUPS: dict[str, str] = {
    "day": "to_char(date_trunc('day', at AT TIME ZONE 'UTC'), 'YYYY-MM-DD')",
    "purpose": "purpose",
    "model": "model",
    "session": "CAST(session_id AS text)",
    "user": "user_id",
    "agent": "agent_id",
}
# one statement per grouping, built once
_REPORT = {
    name: sa.text(
        f"""
        SELECT {expr} AS key, COUNT(*) AS calls,
               COALESCE(SUM(input_tokens), 0) AS input_tokens,
               COALESCE(SUM(output_tokens), 0) AS output_tokens,
               COUNT(*) FILTER (WHERE outcome <> 'ok') AS failed,
               COALESCE(SUM(latency_ms), 0) AS latency_ms
        FROM llm_usage
        WHERE tenant_id = :t AND at >= :since AND at < :until
          AND (CAST(:a AS varchar) IS NULL OR agent_id = CAST(:a AS varchar))
        GROUP BY 1 ORDER BY 1 NULLS LAST
        LIMIT :limit
        """
    )
    for name, expr in GROUPS.items()
}
_REPORT["total"] = sa.text(
    """
    SELECT NULL AS key, COUNT(*) AS calls,
           COALESCE(SUM(input_tokens), 0) AS input_tokens,
           COALESCE(SUM(output_tokens), 0) AS output_tokens,
           COUNT(*) FILTER (WHERE outcome <> 'ok') AS failed,
           COALESCE(SUM(latency_ms), 0) AS latency_ms
    FROM llm_usage
    WHERE tenant_id = :t AND at >= :since AND at < :until
      AND (CAST(:a AS varchar) IS NULL OR agent_id = CAST(:a AS varchar))
      AND CAST(:limit AS int) > 0
    """
)


async def report(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    group_by: str,
    since: datetime,
    until: datetime,
    limit: int,
    agent_id: str | None = None,
) -> list[Any]:
    """The tenant's calls in [since, until) (an agent's only, with `agent_id`), grouped
    (`GROUPS`), at most `limit` groups."""
    params = {"t": tenant_id, "since": since, "until": until, "limit": limit, "a": agent_id}
    return list((await db.execute(_REPORT[group_by], params)).all())


# --- budgets --------------------------------------------------------------------------


async def get_budget(conn: AsyncConnection | AsyncSession, tenant_id: uuid.UUID) -> Any:
    """The tenant's own budget row (None: the default applies)."""
    stmt = sa.text("SELECT daily_tokens, updated_at FROM tenant_budgets WHERE tenant_id = :t")
    return (await conn.execute(stmt, {"t": tenant_id})).one_or_none()


async def set_budget(db: AsyncSession, tenant_id: uuid.UUID, daily_tokens: int | None) -> None:
    await db.execute(
        sa.text(
            # the update's time is the inserted row's (Citus calls no function but
            # immutable ones in DO UPDATE)
            "INSERT INTO tenant_budgets (tenant_id, daily_tokens, updated_at) "
            "VALUES (:t, :d, now()) "
            "ON CONFLICT (tenant_id) DO UPDATE SET daily_tokens = EXCLUDED.daily_tokens, "
            "updated_at = EXCLUDED.updated_at"
        ),
        {"t": tenant_id, "d": daily_tokens},
    )


async def clear_budget(db: AsyncSession, tenant_id: uuid.UUID) -> None:
    await db.execute(sa.text("DELETE FROM tenant_budgets WHERE tenant_id = :t"), {"t": tenant_id})


async def used_since(db: AsyncSession, tenant_id: uuid.UUID, since: datetime) -> int:
    stmt = sa.text(
        "SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM llm_usage "
        "WHERE tenant_id = :t AND at >= :since"
    )
    return int((await db.execute(stmt, {"t": tenant_id, "since": since})).scalar_one())


async def waiting_extractions(db: AsyncSession, tenant_id: uuid.UUID) -> list[uuid.UUID]:
    """The tenant's sessions whose fact extraction waits for the budget
    (`fact_extractions.skipped = 'budget'`, app/facts/tasks.py)."""
    stmt = sa.text(
        "SELECT session_id FROM fact_extractions WHERE tenant_id = :t AND skipped = 'budget'"
    )
    return [r[0] for r in (await db.execute(stmt, {"t": tenant_id})).all()]


async def tenants_waiting(db: AsyncSession, limit: int) -> list[uuid.UUID]:
    """Tenants with an extraction waiting for the budget, across tenants (the cron pass)."""
    stmt = sa.text(
        "/* loom:fan-out */ SELECT DISTINCT tenant_id FROM fact_extractions "
        "WHERE skipped = 'budget' LIMIT :n"
    )
    return [r[0] for r in (await db.execute(stmt, {"n": limit})).all()]

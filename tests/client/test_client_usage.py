"""The client reads what the LLM cost and sets a tenant's daily token budget (issue 47),
sync and async, against the live API. The ledger's row is written as the meter writes it
(the live API has no LLM)."""

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from loom_client import AsyncLoomClient, LoomClient

from tests.client.conftest import TenantKeys


async def _one_call(db: Any, tenant_id: str, tokens: tuple[int, int]) -> None:
    await db.execute(
        sa.text(
            "INSERT INTO llm_usage (tenant_id, id, at, agent_id, purpose, provider, model, "
            "input_tokens, output_tokens, latency_ms, outcome) VALUES (:t, :i, now(), "
            "'agent-1', 'summary', 'anthropic', 'claude-haiku-4-5', :a, :b, 120, 'ok')"
        ),
        {"t": tenant_id, "i": uuid.uuid4(), "a": tokens[0], "b": tokens[1]},
    )
    await db.commit()


async def test_usage_and_budget(
    loom: LoomClient,
    aloom: AsyncLoomClient,
    loom_admin: LoomClient,
    loom_tenant: TenantKeys,
    db: Any,
) -> None:
    empty = loom.get_usage()
    assert empty.total.calls == 0 and empty.items == [] and empty.budget.source == "none"
    await _one_call(db, loom_tenant.tenant_id, (300, 40))
    report = await aloom.get_usage(group_by="purpose", since=datetime.now(UTC) - timedelta(hours=1))
    [group] = report.items
    assert (group.key, group.calls, group.total_tokens, group.avg_latency_ms) == (
        "summary",
        1,
        340,
        120,
    )
    assert report.budget.used_today == 340 and not report.budget.spent

    budget = loom_admin.set_budget(loom_tenant.tenant_id, 300)
    assert (budget.daily_tokens, budget.source, budget.spent) == (300, "tenant", True)
    assert loom.get_budget(loom_tenant.tenant_id).spent
    assert loom.get_usage(group_by="model").budget.daily_tokens == 300
    assert loom_admin.set_budget(loom_tenant.tenant_id, None).source == "none"
    assert loom_admin.reset_budget(loom_tenant.tenant_id).source == "none"  # no default here

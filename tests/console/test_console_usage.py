"""The console's usage view (issue 47), in headless Chromium against a live server: the
tokens of the last days as a bar per day, the totals by purpose and model, and the budget
line. The ledger's rows are written as the meter writes them (the live API has no LLM)."""

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from tests.console.conftest import sign_in
from tests.console.sample import Tenant

pytestmark = pytest.mark.slow


async def _calls(dsn: str, tenant_id: str, rows: list[tuple[datetime, str, int, int]]) -> None:
    conn = await asyncpg.connect(dsn.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.executemany(
            "INSERT INTO llm_usage (tenant_id, id, at, purpose, provider, model, input_tokens, "
            "output_tokens, latency_ms, outcome) VALUES ($1, $2, $3, $4, 'anthropic', "
            "'claude-haiku-4-5', $5, $6, 80, 'ok')",
            [(uuid.UUID(tenant_id), uuid.uuid4(), *r) for r in rows],
        )
    finally:
        await conn.close()


def test_usage_view_charts_days_and_lists_purposes(
    page: Any, server: str, console_tenant: Tenant, settings: Any
) -> None:
    now = datetime.now(UTC)
    yesterday = now - timedelta(days=1)
    # in a thread of its own: the test's event loop is running (the playwright fixtures)
    ThreadPoolExecutor(1).submit(
        asyncio.run,
        _calls(
            settings.database_url,
            console_tenant.id,
            [
                (now, "summary", 1200, 150),
                (now, "rerank", 400, 20),
                (yesterday, "fact_recording", 900, 100),
            ],
        ),
    ).result()
    admin_key = settings.admin_key.get_secret_value()
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {admin_key}"}) as c:
        r = c.put(f"/v1/tenants/{console_tenant.id}/budget", json={"daily_tokens": 1000})
        assert r.status_code == 200, r.text
    sign_in(page, server, console_tenant.service_key, "#/usage")
    page.locator("#usage-chart").wait_for()
    days = page.eval_on_selector_all("#usage-chart g", "gs => gs.map(g => g.dataset.day)")
    assert days == [yesterday.date().isoformat(), now.date().isoformat()]
    purposes = page.eval_on_selector_all(
        "#usage-purposes tr[data-key]", "rs => rs.map(r => r.dataset.key)"
    )
    assert sorted(purposes) == ["fact_recording", "rerank", "summary"]
    assert "1,770" in page.text_content("#usage-budget") or "1770" in page.text_content(
        "#usage-budget"
    )
    assert "spent" in page.text_content("#usage-budget")
    assert "3 LLM calls" in page.text_content("#usage-total")

"""The ledger's batched write (`app.usage.repository.LedgerStore`): a batch of several
tenants goes per tenant, each row taking the agent and user of its own tenant's session
where the call site named none (a named one stays), and nothing of another tenant's."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import sqlalchemy as sa

from app.llm.usage import UsageRow
from app.state import app_state
from app.usage.repository import LedgerStore


def _row(tenant: str, session: uuid.UUID | None, agent: str | None = None) -> UsageRow:
    return UsageRow(
        id=uuid.uuid4(),
        tenant_id=uuid.UUID(tenant),
        at=datetime.now(UTC),
        agent_id=agent,
        user_id=None,
        session_id=session,
        purpose="summary",
        provider="fake",
        model="m",
        input_tokens=3,
        output_tokens=2,
        latency_ms=7,
        outcome="ok",
    )


async def _session(client: httpx.AsyncClient, user: str) -> uuid.UUID:
    r = await client.post("/v1/sessions", json={"user_id": user})
    assert r.status_code == 201, r.text
    return uuid.UUID(r.json()["id"])


async def test_a_batch_of_two_tenants_is_attributed_within_each_tenant(
    tenant: Any, admin_client: httpx.AsyncClient, db: Any
) -> None:
    other = await admin_client.post("/v1/tenants", json={"name": f"t-{uuid.uuid4().hex[:8]}"})
    assert other.status_code == 201, other.text
    b_id = other.json()["id"]
    key = await admin_client.post("/v1/api-keys", json={"tenant_id": b_id, "role": "service"})
    a = tenant.client_for(tenant.service_key, {"X-Agent-Id": "agent-a"})
    b = tenant.client_for(key.json()["secret"], {"X-Agent-Id": "agent-b"})
    sa_, sb = await _session(a, "ada"), await _session(b, "bob")
    rows = [
        _row(tenant.id, sa_),  # from its session
        _row(b_id, sb),  # from its session, in the other tenant
        _row(tenant.id, sa_, agent="named"),  # the named agent stays, the user is filled
        _row(b_id, sa_),  # another tenant's session: nothing of it
        _row(tenant.id, uuid.uuid4()),  # no such session
        _row(tenant.id, None),  # no session at all
    ]
    store = LedgerStore(app_state(tenant.app).db_connection)
    await store.insert(rows)
    found = {
        r.id: (str(r.tenant_id), r.agent_id, r.user_id)
        for r in await db.execute(
            sa.text("SELECT id, tenant_id, agent_id, user_id FROM llm_usage WHERE id = ANY(:ids)"),
            {"ids": [r.id for r in rows]},
        )
    }
    assert [found[r.id] for r in rows] == [
        (tenant.id, "agent-a", "ada"),
        (b_id, "agent-b", "bob"),
        (tenant.id, "named", "ada"),
        (b_id, None, None),
        (tenant.id, None, None),
        (tenant.id, None, None),
    ]
    own, has_own, used = await store.budget(uuid.UUID(b_id), datetime(2000, 1, 1, tzinfo=UTC))
    assert (own, has_own, used) == (None, False, 10)

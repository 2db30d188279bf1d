"""Issue 47: a tenant's daily token budget. Past it, LLM work degrades the documented way
instead of spending: summaries are heuristic, fact extraction waits (`skipped: budget`, and
goes on when the budget is raised), search is not reranked (`rerank_skipped: budget`); the
fake Messages API is asked nothing. Crossing 80% and 100% logs an event and counts it;
Prometheus counts calls and tokens by purpose and model. A ledger that cannot be written
never fails the call."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from prometheus_client import REGISTRY

from app.llm.client import AnthropicLLM
from app.llm.usage import UsageRow, attributed
from app.usage.service import resume_budget_waits
from tests.facts.support import PREFERENCES, FactModel, facts_settings, run_burst_worker, say
from tests.fakes.llm_server import FakeLLMServer
from tests.jobs.support import drain_queue
from tests.support.api import make_client
from workers.settings import shutdown, startup

MODEL = "claude-haiku-4-5"
LONG = " ".join(f"Option {i}: a hotel by the river with breakfast and a view." for i in range(60))


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
async def admin(usage_app: Any, settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(usage_app, settings.admin_key.get_secret_value()) as c:
        yield c


async def test_past_the_budget_llm_work_degrades_and_resumes_when_raised(
    usage_client: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    fake_llm: FakeLLMServer,
    tenant: Any,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
    db: Any,
) -> None:
    caplog.set_level(logging.WARNING, logger="loom.llm.usage")
    await drain_queue(settings)  # the burst worker below runs this test's jobs only
    r = await usage_client.post(
        "/v1/sessions", json={"user_id": "bo", "config": {"facts": {"enabled": True}}}
    )
    sid = r.json()["id"]
    await say(
        usage_client,
        sid,
        ("Hi! I prefer tea in the morning, green if possible.", "Noted, tea it is."),
        ("Let us plan the trip to Lisbon in May.", "Sure, May works."),
    )
    # a budget the first summary crosses: 80% and 100% at once
    r = await admin.put(f"/v1/tenants/{tenant.id}/budget", json={"daily_tokens": 50})
    assert r.status_code == 200, r.text
    assert r.json() == {**r.json(), "daily_tokens": 50, "source": "tenant", "spent": False}
    calls_before = sample("loom_llm_calls_total", purpose="summary", model=MODEL, outcome="ok")
    tokens_before = sample(
        "loom_llm_tokens_total", purpose="summary", model=MODEL, direction="input"
    )
    crossings_before = sample("loom_llm_budget_crossings_total", threshold="1.0")
    r = await usage_client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
    assert r.status_code == 200, r.text
    assert len(fake_llm.requests) >= 1  # under the budget: the LLM summarised
    spent = (await usage_client.get("/v1/usage")).json()["budget"]
    assert spent["spent"] and spent["used_today"] > 50
    assert sample("loom_llm_calls_total", purpose="summary", model=MODEL, outcome="ok") == (
        calls_before + len(fake_llm.requests)
    )
    assert (
        sample("loom_llm_tokens_total", purpose="summary", model=MODEL, direction="input")
        > tokens_before
    )
    assert sample("loom_llm_budget_crossings_total", threshold="1.0") == crossings_before + 1
    events = [m for m in caplog.messages if "daily token budget" in m and tenant.id in m]
    assert [e.split(" has spent ")[1][:4] for e in events] == ["80% ", "100%"]

    # past it: nothing reaches the LLM
    fake_llm.reset()
    await say(
        usage_client,
        sid,
        ("Also, my sister lives in Lisbon.", "Nice city! " + LONG),
        ("Book the hotel near the river.", "Will do. " + LONG),
        day=2,
    )
    refused_before = sample("loom_llm_budget_refusals_total", purpose="summary")
    r = await usage_client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
    assert r.status_code == 200, r.text
    memory = (await usage_client.get(f"/v1/sessions/{sid}/memory")).json()
    assert fake_llm.requests == []
    assert memory["l2"][-1]["method"] == "heuristic", memory["l2"]
    assert sample("loom_llm_budget_refusals_total", purpose="summary") > refused_before

    r = await usage_client.post(
        f"/v1/sessions/{sid}/search", json={"query": "Lisbon hotel", "rerank": True}
    )
    assert r.status_code == 200, r.text
    assert r.json()["reranked"] is False and r.json()["rerank_skipped"] == "budget"

    model = FactModel(PREFERENCES)
    fake_llm.respond_with_tools(model)
    r = await usage_client.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true"})
    assert r.status_code == 200, r.text
    waiting = r.json()["extraction"]
    assert (waiting["status"], waiting["skipped"], waiting["watermark_seq"]) == (
        "skipped",
        "budget",
        0,
    )
    assert fake_llm.requests == []
    used = (await usage_client.get("/v1/usage")).json()["total"]["total_tokens"]
    assert used == spent["used_today"]  # not one token more

    # raised: the extraction that waited is queued at once, and a worker runs it
    r = await admin.put(f"/v1/tenants/{tenant.id}/budget", json={"daily_tokens": 10**9})
    assert r.status_code == 200 and r.json()["spent"] is False, r.text
    await run_burst_worker(facts_settings(settings, fake_llm.base_url))
    status = (await usage_client.get(f"/v1/sessions/{sid}/memory/extract")).json()
    assert status["status"] == "succeeded" and status["watermark_seq"] == 8, status
    assert model.calls and model.calls[0] == "record_facts"
    report = (await usage_client.get("/v1/usage", params={"group_by": "purpose"})).json()
    assert {g["key"] for g in report["items"]} >= {"summary", "fact_recording"}

    # spent again; the next UTC day the worker's cron pass resumes what waited
    r = await admin.put(f"/v1/tenants/{tenant.id}/budget", json={"daily_tokens": 1})
    assert r.json()["spent"] is True
    await say(usage_client, sid, ("Actually I switched to coffee last week.", "Coffee."), day=3)
    r = await usage_client.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true"})
    assert r.json()["extraction"]["skipped"] == "budget", r.text
    worker = facts_settings(settings, fake_llm.base_url, usage_budget_refresh_seconds=0.0)
    ctx: dict[str, Any] = {"settings": worker}
    await startup(ctx)
    try:
        assert (await resume_budget_waits(ctx))["resumed"] == 0  # still today
        # yesterday's spending (a constant: Citus takes no time arithmetic on a column)
        await db.execute(
            sa.text("UPDATE llm_usage SET at = :yesterday WHERE tenant_id = :t"),
            {"t": tenant.id, "yesterday": datetime.now(UTC) - timedelta(days=1, minutes=1)},
        )
        await db.commit()
        assert (await resume_budget_waits(ctx))["resumed"] == 1  # a new day
    finally:
        await shutdown(ctx)
    await run_burst_worker(worker)
    status = (await usage_client.get(f"/v1/sessions/{sid}/memory/extract")).json()
    assert status["status"] == "succeeded" and status["watermark_seq"] == 10, status


async def test_budget_administration(
    usage_client: httpx.AsyncClient, admin: httpx.AsyncClient, tenant: Any
) -> None:
    path = f"/v1/tenants/{tenant.id}/budget"
    r = await usage_client.get(path)  # a key of the tenant may read it
    assert r.status_code == 200 and r.json()["source"] == "none", r.text
    r = await usage_client.put(path, json={"daily_tokens": 5})
    assert r.status_code == 403, r.text
    r = await admin.put(path, json={"daily_tokens": -1})
    assert r.status_code == 422, r.text
    r = await admin.put(path, json={"daily_tokens": 5, "extra": 1})
    assert r.status_code == 422, r.text
    r = await admin.put(f"/v1/tenants/{uuid.uuid4()}/budget", json={"daily_tokens": 5})
    assert r.status_code == 404, r.text
    r = await usage_client.get(f"/v1/tenants/{uuid.uuid4()}/budget")
    assert r.status_code == 403, r.text
    r = await admin.put(path, json={"daily_tokens": None})
    assert r.json()["source"] == "none" and r.json()["daily_tokens"] is None
    r = await admin.delete(path)
    assert r.status_code == 200 and r.json()["source"] == "none", r.text


class BrokenStore:
    """A ledger whose writes fail (the database gone): the calls must not notice."""

    def __init__(self) -> None:
        self.tried = 0

    async def insert(self, rows: Sequence[UsageRow]) -> None:
        self.tried += len(rows)
        raise ConnectionError("database unreachable")

    async def budget(self, tenant_id: uuid.UUID, since: datetime) -> tuple[int | None, bool, int]:
        raise ConnectionError("database unreachable")


async def test_a_ledger_that_cannot_be_written_never_fails_the_call(
    fake_llm: FakeLLMServer,
) -> None:
    llm = AnthropicLLM(
        api_key="sk-ant-fake",
        base_url=fake_llm.base_url,
        model=MODEL,
        rerank_model=None,
        timeout=5,
        max_retries=0,
    )
    store = BrokenStore()
    llm.meter.attach(store, default_budget=10, refresh=0)
    dropped = sample("loom_llm_ledger_dropped_total")
    with attributed("summary", uuid.uuid4()):
        assert await llm.complete("system", "prompt", max_tokens=50)
    await llm.aclose()  # flushes: the write fails, is counted, and nothing is raised
    assert store.tried == 1
    assert sample("loom_llm_ledger_dropped_total") == dropped + 1

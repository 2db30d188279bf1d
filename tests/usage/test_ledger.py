"""Issue 47: every LLM call the service makes lands in the cost ledger (tenant, agent, user,
session, purpose, model, tokens, latency, outcome), `GET /v1/usage` reports it grouped, and
erasing a user blanks whose the calls were while the day/purpose totals stay. The model is
the fake Anthropic server behind the real SDK; its tokens come from its answers."""

from __future__ import annotations

from typing import Any

import httpx
import sqlalchemy as sa

from tests.facts.support import PREFERENCES, FactModel, say
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, default_text
from tests.support.api import make_client
from tests.usage.conftest import text_tokens, tool_tokens

RERANK_ANSWER = '[{"index": 0, "score": 9}, {"index": 1, "score": 2}]'


async def usage(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    r = await client.get("/v1/usage", params=params)
    assert r.status_code == 200, r.text
    return dict(r.json())


def by_key(report: dict[str, Any]) -> dict[str | None, dict[str, Any]]:
    return {g["key"]: g for g in report["items"]}


async def test_every_call_is_recorded_once_with_who_and_why_and_erasure_blanks_the_user(
    usage_client: httpx.AsyncClient, usage_app: Any, fake_llm: FakeLLMServer, db: Any, tenant: Any
) -> None:
    r = await usage_client.post(
        "/v1/sessions",
        json={"user_id": "ada", "config": {"facts": {"enabled": True}}},
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    await say(
        usage_client,
        sid,
        ("Hi! I prefer tea in the morning, green if possible.", "Noted, tea it is."),
        ("My sister lives in Lisbon, by the way.", "Nice city!"),
        ("Let us plan the trip to Lisbon in May.", "Sure, May works."),
    )
    expected: dict[str, list[int]] = {}

    def add(purpose: str, tokens: tuple[int, int]) -> None:
        got = expected.setdefault(purpose, [0, 0, 0])
        got[0], got[1], got[2] = got[0] + 1, got[1] + tokens[0], got[2] + tokens[1]

    # 1. fact extraction: one record_facts call per batch
    model = FactModel(PREFERENCES)
    answers: list[tuple[RecordedRequest, Any]] = []

    def tools(req: RecordedRequest) -> Any:
        data = model(req)
        answers.append((req, data))
        return data

    fake_llm.respond_with_tools(tools)
    r = await usage_client.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true"})
    assert r.status_code == 200, r.text
    status = r.json()["extraction"]
    assert answers and model.calls[0] == "record_facts"
    for req, data in answers:
        add(
            "fact_recording" if req.tool_name == "record_facts" else "fact_decision",
            tool_tokens(req, data),
        )

    # 2. a summary: compress now
    fake_llm.reset()
    r = await usage_client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
    assert r.status_code == 200, r.text
    summaries = list(fake_llm.requests)
    assert summaries, "the compression asked the LLM"
    for req in summaries:
        add("summary", text_tokens(req, default_text(req)))

    # 3. a reranked search
    fake_llm.reset()
    fake_llm.respond_with(RERANK_ANSWER)
    r = await usage_client.post(
        f"/v1/sessions/{sid}/search", json={"query": "Lisbon trip", "rerank": True}
    )
    assert r.status_code == 200, r.text
    assert r.json()["rerank_skipped"] is None
    [rerank] = fake_llm.requests
    add("rerank", text_tokens(rerank, RERANK_ANSWER))

    # the report by purpose is exactly what the fake server billed
    report = await usage(usage_client, group_by="purpose")
    got = {
        k: [g["calls"], g["input_tokens"], g["output_tokens"]] for k, g in by_key(report).items()
    }
    assert got == expected
    total = report["total"]
    assert total["calls"] == sum(v[0] for v in expected.values())
    assert total["total_tokens"] == sum(v[1] + v[2] for v in expected.values())
    assert (
        report["budget"]["source"] == "none"
        and report["budget"]["used_today"] == (total["total_tokens"])
    )
    # the extraction's own count agrees with the ledger's
    facts = [v for k, v in expected.items() if k.startswith("fact_")]
    assert status["llm_input_tokens"] == sum(v[1] for v in facts)

    # by session, user, agent, model and day: one group each, all of it
    for group, key in (
        ("session", sid),
        ("user", "ada"),
        ("agent", "agent-1"),
        ("model", "claude-haiku-4-5"),
    ):
        groups = by_key(await usage(usage_client, group_by=group))
        assert list(groups) == [key], (group, groups)
        assert groups[key]["total_tokens"] == total["total_tokens"]
    [day] = (await usage(usage_client, group_by="day"))["items"]
    assert day["calls"] == total["calls"]

    # the rows as stored: provider, latency, outcome, the session's agent and user
    rows = (
        await db.execute(
            sa.text(
                "SELECT agent_id, user_id, session_id, provider, outcome, latency_ms "
                "FROM llm_usage WHERE tenant_id = :t"
            ),
            {"t": tenant.id},
        )
    ).all()
    assert len(rows) == total["calls"]
    assert {(r.agent_id, r.user_id, str(r.session_id), r.provider, r.outcome) for r in rows} == {
        ("agent-1", "ada", sid, "anthropic", "ok")
    }
    assert all(r.latency_ms >= 0 for r in rows)

    # another tenant sees none of it; an admin sees it with X-Tenant-Id
    admin = tenant.admin
    r = await admin.get(
        "/v1/usage", params={"group_by": "purpose"}, headers={"X-Tenant-Id": tenant.id}
    )
    assert r.status_code == 200 and r.json()["total"] == total, r.text
    other = await admin.post("/v1/tenants", json={"name": f"other-{sid}"})
    assert other.status_code == 201, other.text
    r = await admin.get("/v1/usage", headers={"X-Tenant-Id": other.json()["id"]})
    assert r.status_code == 200 and r.json()["total"]["calls"] == 0, r.text
    r = await admin.get("/v1/usage")
    assert r.status_code == 400 and r.json()["error"]["code"] == "tenant_required", r.text

    # erasing the user: the rows stay, counted by purpose and day, but name nobody
    r = await usage_client.delete("/v1/users/ada")
    assert r.status_code == 200, r.text  # small enough to be erased in the request
    receipt = r.json()
    assert receipt["status"] == "completed", receipt
    assert receipt["counts"]["llm_usage_anonymised"] == total["calls"]
    after = await usage(usage_client, group_by="purpose")
    assert after["total"] == total
    assert list(by_key(await usage(usage_client, group_by="user"))) == [None]
    assert list(by_key(await usage(usage_client, group_by="session"))) == [None]
    left = (
        await db.execute(
            sa.text(
                "SELECT count(*) FROM llm_usage WHERE tenant_id = :t "
                "AND (user_id IS NOT NULL OR session_id IS NOT NULL OR agent_id IS NOT NULL)"
            ),
            {"t": tenant.id},
        )
    ).scalar_one()
    assert left == 0


async def test_usage_refuses_a_bad_range_and_agent_keys_see_their_agent(
    usage_client: httpx.AsyncClient, usage_app: Any, tenant: Any
) -> None:
    r = await usage_client.get(
        "/v1/usage", params={"since": "2026-05-02T00:00:00Z", "until": "2026-05-01T00:00:00Z"}
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_range", r.text
    r = await usage_client.get(
        "/v1/usage", params={"since": "2020-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    )
    assert r.status_code == 400, r.text
    r = await usage_client.get("/v1/usage", params={"group_by": "tenant"})
    assert r.status_code == 422, r.text
    key = await tenant.create_key("agent", "agent-2")
    async with make_client(usage_app, key["secret"]) as agent:
        report = await usage(agent, group_by="agent")
        assert report["items"] == [] and report["total"]["calls"] == 0

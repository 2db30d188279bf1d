"""Segmented memory over HTTP with small budgets and long tool-heavy conversations."""

from __future__ import annotations

import random
import uuid
from typing import Any

import httpx
import sqlalchemy as sa
from sqlmodel import col

from app.memory import service
from app.memory.errors import StaleMemoryState
from app.memory.heuristic_summariser import heuristic_summary
from app.models import Session
from app.models.memory import MemorySummary
from tests.support.api import create_session, new_session
from tests.support.sa_conn import driver_connection

SMALL: dict[str, Any] = {
    "max_context_tokens": 2000,
    "reserved_output_tokens": 200,
    "l1_max_messages": 10,
    "max_l2_tokens": 400,
}


def turn(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """A user question, optionally parallel tool calls with results, an answer."""
    words = " ".join(
        rng.choice(["alpha", "beta", "gamma", "delta", "query", "rows"])
        for _ in range(rng.randint(5, 60))
    )
    msgs: list[dict[str, Any]] = [{"role": "user", "content": f"q{n}: {words}"}]
    if rng.random() < 0.6:
        k = rng.randint(1, 3)
        calls = [
            {"id": f"c{n}_{i}", "name": "run_sql", "input": {"q": words[:40]}} for i in range(k)
        ]
        msgs.append({"role": "assistant", "content": "checking", "tool_calls": calls})
        if rng.random() < 0.5:
            msgs += [{"role": "tool", "tool_call_id": c["id"], "content": words} for c in calls]
        else:  # Anthropic shape: all results in one user message
            msgs.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": c["id"], "content": words}
                        for c in calls
                    ],
                }
            )
    msgs.append({"role": "assistant", "content": f"answer {n}: {words[:200]}"})
    return msgs


def check_context(ctx: dict[str, Any], cap: int) -> None:
    assert ctx["total_tokens"] <= ctx["budget"]
    assert sum(ctx["tokens"].values()) == ctx["total_tokens"]
    seen_uses: list[str] = []
    for m in ctx["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else []
        for b in blocks:
            if b["type"] == "tool_result":
                assert b["tool_use_id"] in seen_uses, "tool_result without its tool_use"
            if b["type"] == "tool_use":
                seen_uses.append(b["id"])
    results = {
        b["tool_use_id"]
        for m in ctx["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    }
    assert set(seen_uses) <= results, "tool_use without its tool_result"


async def test_long_conversation_stays_within_budget_and_keeps_invariants(
    client: httpx.AsyncClient,
) -> None:
    sid = await new_session(client, **SMALL)
    rng = random.Random(7)
    for n in range(40):
        resp = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(rng, n)})
        assert resp.status_code == 201, resp.text
        ctx = (
            await client.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})
        ).json()
        check_context(ctx, 10)
        assert len(ctx["l1_seqs"]) <= 10
        if n % 5 == 4:  # a job (or wait=true) writes the summaries
            done = await client.post(f"/v1/sessions/{sid}/memory/compress?wait=true")
            assert done.status_code == 200, done.text
            mem = done.json()["memory"]
            assert len(mem["l1_seqs"]) <= 10
            assert all(s["end_seq"] < min(mem["l1_seqs"]) for s in mem["l2"])
            assert mem["tokens"]["l2"] <= SMALL["max_l2_tokens"]
    mem = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert mem["snapshot_count"] >= 1  # L2 overflowed its cap at least once
    snaps = (await client.get(f"/v1/sessions/{sid}/memory/snapshots")).json()["items"]
    assert snaps and "covers msg:" in snaps[0]["content"]
    for fmt in ("openai", "raw"):
        other = await client.post(f"/v1/sessions/{sid}/context", json={"format": fmt})
        assert other.status_code == 200 and other.json()["total_tokens"] <= 1800
    detail = (await client.get(f"/v1/sessions/{sid}")).json()
    assert detail["memory"]["l2"] == mem["tokens"]["l2"]


async def test_schema_lru_evicts_least_recently_used(client: httpx.AsyncClient) -> None:
    sid = await new_session(client, max_context_tokens=20000)
    for i in range(10):
        r = await client.put(
            f"/v1/sessions/{sid}/kernel/schemas/s{i}", json={"schema": {"table": f"t{i}"}}
        )
        assert r.status_code == 200 and r.json()["evicted"] == []
    assert (await client.get(f"/v1/sessions/{sid}/kernel/schemas/s0")).status_code == 200
    r = await client.put(f"/v1/sessions/{sid}/kernel/schemas/s10", json={"schema": {}})
    assert r.json()["evicted"] == ["s1"]  # s0 was read, so s1 was least recent
    kernel = (await client.get(f"/v1/sessions/{sid}/kernel")).json()
    assert [s["name"] for s in kernel["schemas"]][:2] == ["s10", "s0"]
    assert len(kernel["schemas"]) == 10
    tools = await client.put(
        f"/v1/sessions/{sid}/kernel/tools",
        json={
            "tools": [
                {
                    "name": "run_sql",
                    "description": "Run SQL",
                    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
                }
            ]
        },
    )
    assert tools.status_code == 200 and tools.json()["tokens"] > kernel["tokens"]
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "openai"})).json()
    assert ctx["tools"][0]["function"]["name"] == "run_sql"


async def test_promote_over_budget_is_409_and_clear_restores_usage(
    client: httpx.AsyncClient,
) -> None:
    sid = await new_session(client, **SMALL)
    rng = random.Random(3)
    for n in range(12):
        await client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(rng, n)})
    await client.post(f"/v1/sessions/{sid}/memory/compress?wait=true")
    before = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    first_l1 = before["l1_start_seq"]
    ok = await client.post(f"/v1/sessions/{sid}/memory/promote", json={"seqs": [1]})
    assert ok.status_code == 200 and ok.json()["added"] == [1]
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
    assert [m["seq"] for m in ctx["layers"]["promoted"]] == [1]
    too_much = await client.post(
        f"/v1/sessions/{sid}/memory/promote", json={"start_seq": 1, "end_seq": first_l1 - 1}
    )
    assert too_much.status_code == 409, too_much.text
    assert too_much.json()["error"]["code"] == "over_budget"
    cleared = await client.delete(f"/v1/sessions/{sid}/memory/promoted")
    assert cleared.json() == {"cleared": 1}
    after = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert after["usage"] == before["usage"] and after["tokens"] == before["tokens"]


async def test_compress_without_wait_is_202(client: httpx.AsyncClient) -> None:
    sid = await new_session(client, **SMALL)
    resp = await client.post(f"/v1/sessions/{sid}/memory/compress")
    assert resp.status_code == 202 and "enqueued" in resp.json()


async def test_stale_plan_is_refused_and_never_duplicates(client: httpx.AsyncClient, db) -> None:
    sid = await new_session(client, **SMALL)
    rng = random.Random(5)
    for n in range(8):
        await client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(rng, n)})
    row = (await db.execute(sa.select(Session).where(col(Session.id) == sid))).scalar_one()
    plan = await service.plan_compression(await driver_connection(db), row)
    assert plan is not None
    drafts = [heuristic_summary(r.messages) for r in plan.ranges]
    await service.apply_compression(await driver_connection(db), row, plan, drafts)
    await db.commit()
    try:
        await service.apply_compression(await driver_connection(db), row, plan, drafts)
        raise AssertionError("a second apply of the same plan must be refused")
    except StaleMemoryState:
        await db.rollback()
    count = (
        await db.execute(
            sa.select(sa.func.count())
            .select_from(MemorySummary)
            .where(col(MemorySummary.session_id) == uuid.UUID(sid))
        )
    ).scalar_one()
    assert count == len(plan.ranges)


async def test_other_tenant_and_agent_cannot_read_memory(client: httpx.AsyncClient, tenant) -> None:
    sid = await new_session(client, **SMALL)
    other = await tenant.new_client(role="agent", agent_id="someone-else")
    resp = await other.get(f"/v1/sessions/{sid}/memory")
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["code"] == "session_not_found"
    resp = await other.get("/v1/agents/agent-1/profile")
    assert resp.status_code == 403, resp.text
    assert resp.json()["error"]["code"] == "agent_mismatch"


async def test_small_window_caps_l2_at_a_quarter_of_the_budget(client: httpx.AsyncClient) -> None:
    """No max_l2_tokens given: a 4,000-token window has a 3,600 budget, so L2 is archived
    as a snapshot past 900 tokens (not past the 5,000 default, above the budget)."""
    session = await create_session(client, max_context_tokens=4000)
    sid = session["id"]
    assert session["budget"] == 3600 and session["config"]["max_l2_tokens"] is None
    rng = random.Random(11)
    for n in range(60):
        r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(rng, n)})
        assert r.status_code == 201, r.text
        if n % 4 == 3:
            done = await client.post(f"/v1/sessions/{sid}/memory/compress?wait=true")
            assert done.status_code == 200, done.text
            assert done.json()["memory"]["tokens"]["l2"] <= 900
    mem = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert mem["snapshot_count"] >= 1
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
    assert ctx["total_tokens"] <= 3600 and ctx["tokens"]["l2"] <= 900


async def test_promote_while_compression_is_pending(client: httpx.AsyncClient) -> None:
    """Messages the context shows only as stand-ins (their compression still pending) can
    be promoted; verbatim ones are named as skipped; over budget is 409 whatever the
    compression state."""
    sid = await new_session(client, max_context_tokens=1500, reserved_output_tokens=150)
    words = "migration plan database index vacuum replica"
    for n in range(1, 21):
        role = "user" if n % 2 else "assistant"
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": role, "content": f"m{n}: " + " ".join([words] * 11)}]},
        )
        assert r.status_code == 201, r.text
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
    assert ctx["compression"]["pending"] is True
    assert ctx["compression"]["stand_in_ranges"][0][0] == 1
    verbatim = [m["seq"] for m in ctx["layers"]["l1"]]
    assert 1 not in verbatim and 2 not in verbatim
    ok = await client.post(f"/v1/sessions/{sid}/memory/promote", json={"seqs": [1, 2, 20]})
    assert ok.status_code == 200, ok.text
    assert ok.json()["added"] == [1, 2]
    assert ok.json()["skipped"] == [{"seq": 20, "reason": "shown_verbatim"}]
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
    assert [m["seq"] for m in ctx["layers"]["promoted"]] == [1, 2]
    assert ctx["total_tokens"] <= 1350
    await client.delete(f"/v1/sessions/{sid}/memory/promoted")
    every = await client.post(
        f"/v1/sessions/{sid}/memory/promote", json={"start_seq": 1, "end_seq": 20}
    )
    assert every.status_code == 409, every.text
    assert every.json()["error"]["code"] == "over_budget"


async def test_compress_with_wait_after_a_202_compresses_and_reports_the_job(
    client: httpx.AsyncClient,
) -> None:
    """wait=true right after a 202 runs the compression in the request: 200 once the
    session is compressed, the job row says succeeded."""
    sid = await new_session(client, **SMALL)
    rng = random.Random(5)
    for n in range(8):
        await client.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(rng, n)})
    queued = await client.post(f"/v1/sessions/{sid}/memory/compress")
    assert queued.status_code == 202 and queued.json()["enqueued"] is True
    pending = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert pending["compression"]["status"] == "pending" and pending["l2"] == []
    done = await client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["summaries_written"] >= 1
    mem = body["memory"]
    assert mem["l2"] and mem["compression"]["status"] == "succeeded"
    assert mem["l1_start_seq"] > 1 and all(s["end_seq"] < mem["l1_start_seq"] for s in mem["l2"])

"""Erasing a user reaches every derived byte (issue 28): a user with three sessions (two
agents), facts in the user tier and from the sessions, shared-memory session entries,
an offloaded tool result with its reference, an idempotency record, search statistics, and
a compression and a fact extraction queued in Redis. After DELETE /v1/users/{id}: every
table and every Redis key scanned for the user id and the conversation's marker strings,
zero hits; the receipt's counts equal what was there."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import sqlalchemy as sa
from redis.asyncio import Redis

from app.shared_memory.runtime import SharedMemoryRuntime
from app.state import app_state
from tests.erasure.scan import redis_hits, table_hits
from tests.facts.support import FactModel, Rule, say
from tests.fakes.llm_server import FakeLLMServer


async def _count(db: Any, sql: str, **params: Any) -> int:
    return int((await db.execute(sa.text(sql), params)).scalar_one())


async def census(db: Any, tid: str, user: str, sids: list[str]) -> dict[str, int]:
    """What the user has, per kind of data, read behind the API."""
    p = {"t": tid, "u": user, "s": sids}
    per_session = {
        "messages": "messages",
        "summaries": "memory_summaries",
        "snapshots": "memory_snapshots",
        "memory_states": "memory_states",
        "search_stats": "search_stats",
        "idempotency_records": "idempotency_records",
        "compression_jobs": "compression_jobs",
        "fact_extractions": "fact_extractions",
        "context_manifests": "context_manifests",
        "references": "shared_memory_ref_holders",
    }
    out = {
        k: await _count(
            db, f"SELECT count(*) FROM {t} WHERE tenant_id = :t AND session_id::text = ANY(:s)", **p
        )
        for k, t in per_session.items()
    }
    out["sessions"] = len(sids)
    out["shared_memory_entries"] = await _count(
        db,
        "SELECT count(*) FROM shared_memory_entries WHERE tenant_id = :t "
        "AND namespace = 'session' AND scope_id = ANY(:s)",
        **p,
    )
    items = (
        "SELECT id FROM memory_items WHERE tenant_id = :t AND ((scope_kind = 'user' "
        "AND scope_id = :u) OR source_session_id::text = ANY(:s))"
    )
    out["facts"] = await _count(db, f"SELECT count(*) FROM ({items}) i", **p)
    out["fact_versions"] = await _count(
        db,
        f"SELECT count(*) FROM memory_item_versions WHERE tenant_id = :t AND "
        f"(item_id IN ({items}) OR source_session_id::text = ANY(:s))",
        **p,
    )
    return out


async def test_erasing_a_user_leaves_nothing_and_counts_what_was_there(
    llm_client: httpx.AsyncClient, llm_app: Any, tenant: Any, fake_llm: FakeLLMServer, db: Any
) -> None:
    tag = uuid.uuid4().hex[:10]
    user = f"user-{tag}"
    marker, city, secret = f"Mk{tag}a", f"Ci{tag}b", f"Se{tag}c"
    fake_llm.respond_with_tools(
        FactModel(
            [
                Rule("sister lives in", f"The user's sister lives in {city}.", "sister"),
                Rule("I prefer", f"The user prefers tea {marker}.", "drink"),
            ]
        )
    )
    facts = {"facts": {"enabled": True, "scope": "user", "min_batch": 1}}
    sids = []
    for agent in ("agent-1", "agent-1", "agent-2"):
        r = await llm_client.post(
            "/v1/sessions", json={"user_id": user, "agent_id": agent, "config": facts}
        )
        assert r.status_code == 201, r.text
        sids.append(r.json()["id"])
    s1, s2, s3 = sids

    # facts in the user tier, drawn from the first session
    await say(llm_client, s1, (f"My sister lives in {city}, I prefer tea {marker}.", "ok"))
    r = await llm_client.post(f"/v1/sessions/{s1}/memory/extract", params={"wait": "true"})
    assert r.status_code == 200 and r.json()["result"]["added"] == 2, r.text
    r = await llm_client.post("/v1/memory-items/query", json={"filters": {"scope": f"user/{user}"}})
    assert len(r.json()["items"]) == 2
    # a fact of the second agent's session shows the first one's facts (same user)
    r = await llm_client.post(
        f"/v1/sessions/{s3}/messages",
        headers={"X-Agent-Id": "agent-2"},
        json={"messages": [{"role": "user", "content": "where does my sister live?"}]},
    )
    assert r.status_code == 201, r.text
    ctx = await llm_client.post(
        f"/v1/sessions/{s3}/context", headers={"X-Agent-Id": "agent-2"}, json={"format": "raw"}
    )
    assert ctx.status_code == 200 and city in ctx.text, ctx.text[:2000]

    # an offloaded tool result (a data reference held by a message) and a session entry
    big = json.dumps([{"row": i, "note": secret} for i in range(6000)])
    r = await llm_client.post(
        f"/v1/sessions/{s2}/messages",
        headers={"Idempotency-Key": tag},
        json={
            "messages": [
                {"role": "user", "content": f"dump it {marker}"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "tu_1", "name": "dump", "input": {"q": marker}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": big}],
                },
            ]
        },
    )
    assert r.status_code == 201, r.text
    ref = r.json()["messages"][2]["metadata"]["data_ref"]["id"]
    assert (await llm_client.get(f"/v1/refs/{ref}")).status_code == 200  # in the tier now
    r = await llm_client.put(
        "/v1/shared-memory/session/notes", params={"scope_id": s2}, json={"value": {"plan": secret}}
    )
    assert r.status_code == 201, r.text
    # search statistics, and a compression and an extraction queued (no worker runs here)
    r = await llm_client.post(
        "/v1/search", json={"query": marker, "scope": "user", "user_id": user, "rerank": False}
    )
    assert r.status_code == 200 and r.json()["results"]
    await say(llm_client, s3, (f"I prefer {marker} again", "sure"), day=2)
    assert (
        await llm_client.post(
            f"/v1/sessions/{s3}/memory/compress", headers={"X-Agent-Id": "agent-2"}
        )
    ).status_code == 202
    assert (await llm_client.post(f"/v1/sessions/{s1}/memory/extract")).status_code == 202
    state = app_state(llm_app)
    redis: Redis = state.redis
    queued = sum(
        [await redis.exists(f"arq:job:{j}:{s}") for s in sids for j in ("compress", "facts")]
    )
    assert queued >= 2

    needles = [user, marker, city, secret]
    before = await table_hits(db, needles)
    assert {
        "messages",
        "memory_items",
        "memory_item_versions",
        "sessions",
        "shared_memory_entries",
    } <= set(before), before
    expected = await census(db, tenant.id, user, sids)
    await db.rollback()

    r = await llm_client.delete(f"/v1/users/{user}")
    assert r.status_code == 200, r.text
    receipt = r.json()
    assert receipt["status"] == "completed" and receipt["kind"] == "user"
    assert receipt["finished_at"] and r.headers["location"].endswith(receipt["erasure_id"])
    counts = receipt["counts"]
    assert counts["queued_jobs"] == queued
    assert {k: counts[k] for k in expected} == expected
    assert expected["references"] >= 1 and expected["shared_memory_entries"] >= 2
    assert expected["facts"] == 2 and expected["fact_versions"] >= 2

    assert await table_hits(db, needles) == {}
    assert await redis_hits(redis, needles) == []
    assert not any(
        [await redis.exists(f"arq:job:{j}:{s}") for s in sids for j in ("compress", "facts")]
    )
    assert not [
        k
        for k in list(state.parts[SharedMemoryRuntime].tier._map)
        if isinstance(k, tuple) and k[2] in sids
    ]
    await db.rollback()
    assert await _count(db, "SELECT count(*) FROM sessions WHERE id::text = ANY(:s)", s=sids) == 0

    # the receipt stays, without the id; a second DELETE finds nothing; GET shows it
    row = (
        await db.execute(
            sa.text(
                "SELECT subject, subject_hash, requested_role, counts FROM erasures WHERE id = :e"
            ),
            {"e": receipt["erasure_id"]},
        )
    ).one()
    assert row.subject is None and len(row.subject_hash) == 64
    assert row.requested_role == "service"
    got = await llm_client.get(f"/v1/erasures/{receipt['erasure_id']}")
    assert got.status_code == 200 and got.json() == receipt
    assert (await llm_client.delete(f"/v1/users/{user}")).status_code == 404
    found = await llm_client.get("/v1/erasures", params={"user_id": user})
    assert [e["erasure_id"] for e in found.json()["items"]] == [receipt["erasure_id"]]
    for sid in sids:
        assert (await llm_client.get(f"/v1/sessions/{sid}")).status_code == 404
    assert (await llm_client.get(f"/v1/refs/{ref}")).status_code == 404

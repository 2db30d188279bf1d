"""Background compression through HTTP and a real (in-process, burst) arq worker."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import sqlalchemy as sa
from sqlmodel import col

from app.core.config import Settings
from app.jobs.service import enqueue_compression
from app.memory.tasks import compress_busy_sessions
from app.models.memory import MemorySummary
from tests.fakes.llm_server import FakeLLMServer
from tests.jobs.support import (
    FAKE_KEY,
    append,
    drain_queue,
    exchange,
    llm_settings,
    memory,
    new_session,
    run_burst_worker,
)
from tests.support.worker import worker_ctx

COVERS = re.compile(r"covers msg:(\d+)-(\d+)")


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def summaries_of(db: Any, sid: str) -> list[MemorySummary]:
    rows = await db.execute(
        sa.select(MemorySummary)
        .where(col(MemorySummary.session_id) == sid)
        .order_by(col(MemorySummary.start_seq))
    )
    return list(rows.scalars())


async def test_long_conversation_gets_llm_summaries_in_background(
    client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer, app: Any, db: Any
) -> None:
    await drain_queue(settings)
    sid = await new_session(client)
    assert (await memory(client, sid))["compression"] is None
    for n in range(8):
        await append(client, sid, exchange(n))
    # Appending never waited for a summary: the LLM has not been asked anything yet.
    assert fake_llm.requests == []
    before = await memory(client, sid)
    assert before["compression"]["status"] == "pending"
    assert before["l2"] == [] and before["compression_due"]
    metrics_before = (await client.get("/metrics")).text

    await run_burst_worker(llm_settings(settings, fake_llm))

    after = await memory(client, sid)
    assert after["compression"]["status"] == "succeeded"
    assert after["compression"]["summaries_written"] == len(after["l2"]) > 0
    assert after["compression"]["tokens_saved"] > 0
    assert all(s["method"] == "llm" for s in after["l2"])
    assert len(after["l1_seqs"]) <= 10
    assert all(s["end_seq"] < min(after["l1_seqs"]) for s in after["l2"])
    # The summariser was asked exactly the ranges that were stored, with their messages.
    asked = sorted(r.covered for r in fake_llm.requests)
    stored = sorted((s["start_seq"], s["end_seq"]) for s in after["l2"])
    assert asked == stored
    history = (await client.get(f"/v1/sessions/{sid}/messages?limit=50")).json()
    by_seq = {m["seq"]: m for m in history["items"]}
    for req in fake_llm.requests:
        start, end = req.covered
        assert req.json["model"] == "claude-haiku-4-5"
        assert FAKE_KEY not in req.text
        for seq in range(start, end + 1):
            assert f"[msg {seq}] {by_seq[seq]['role']}: {by_seq[seq]['content']}" in req.text
        assert f"[msg {end + 1}]" not in req.text and f"[msg {start - 1}]" not in req.text
    for s in after["l2"]:
        found = COVERS.search(s["text"])
        assert found is not None and found.groups() == (str(s["start_seq"]), str(s["end_seq"]))
        assert "FAKE LLM SUMMARY" in s["text"]
    rows = await summaries_of(db, sid)
    assert len({r.start_seq for r in rows}) == len(rows)
    metrics_after = (await client.get("/metrics")).text
    assert metric(metrics_after, "loom_compression_jobs_run_total") > metric(
        metrics_before, "loom_compression_jobs_run_total"
    )
    assert metric(metrics_after, "loom_compression_tokens_saved_total") > metric(
        metrics_before, "loom_compression_tokens_saved_total"
    )
    assert metric(metrics_after, 'loom_summaries_written_total{method="llm"}') > metric(
        metrics_before, 'loom_summaries_written_total{method="llm"}'
    )


async def test_llm_failure_retries_then_writes_heuristic_summaries(
    client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    fake_llm.fail(529)
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    before = (await client.get("/metrics")).text

    await run_burst_worker(llm_settings(settings, fake_llm, compress_llm_tries=2))

    mem = await memory(client, sid)
    assert mem["l2"] and all(s["method"] == "heuristic" for s in mem["l2"])
    assert mem["compression"]["status"] == "succeeded"
    assert mem["compression"]["attempts"] == 2  # one LLM try, rescheduled, then fallback
    assert fake_llm.requests, "the LLM was tried first"
    after = (await client.get("/metrics")).text
    assert metric(after, "loom_compression_jobs_retried_total") > metric(
        before, "loom_compression_jobs_retried_total"
    )


async def test_non_retryable_llm_error_falls_back_at_once(
    client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    fake_llm.fail(401)
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    await run_burst_worker(llm_settings(settings, fake_llm, compress_llm_tries=5))
    mem = await memory(client, sid)
    assert mem["l2"] and all(s["method"] == "heuristic" for s in mem["l2"])
    assert mem["compression"]["attempts"] == 1


async def test_no_llm_configured_gives_heuristic(
    client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    await run_burst_worker(llm_settings(settings, fake_llm, anthropic_api_key=None))
    mem = await memory(client, sid)
    assert mem["l2"] and all(s["method"] == "heuristic" for s in mem["l2"])
    assert fake_llm.requests == []


async def test_forced_compression_from_the_api_runs_in_the_worker(
    client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    sid = await new_session(client)
    for n in range(2):  # 4 messages: nothing due by itself
        await append(client, sid, exchange(n))
    resp = await client.post(f"/v1/sessions/{sid}/memory/compress")
    assert resp.status_code == 202, resp.text
    await run_burst_worker(llm_settings(settings, fake_llm))
    mem = await memory(client, sid)
    assert [s["method"] for s in mem["l2"]] == ["llm"]


async def test_enqueue_is_deduplicated_per_session(
    client: httpx.AsyncClient, settings: Settings, app: Any, tenant: Any, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    for _ in range(3):
        assert await enqueue_compression(
            app, app.state.loom.db_connection, uuid.UUID(tenant.id), uuid.UUID(sid), trigger="test"
        )
    assert await app.state.loom.redis.zcard(settings.queue_name) == 1
    await run_burst_worker(llm_settings(settings, fake_llm))
    assert (await memory(client, sid))["compression"]["runs"] == 1


async def test_cron_pass_finds_busy_sessions_whose_enqueue_was_lost(
    client: httpx.AsyncClient, settings: Settings, app: Any, tenant: Any, fake_llm: FakeLLMServer
) -> None:
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    await drain_queue(settings)  # the enqueue from the append is lost
    s = llm_settings(settings, fake_llm)
    assert s.redis_url
    # the job row says pending: a lost enqueue is picked up once it is old enough
    async with app.state.loom.db_connection() as conn:
        await conn.execute(
            "UPDATE compression_jobs SET updated_at = now() - interval '1 hour' "
            "WHERE tenant_id = $1 AND session_id = $2",
            uuid.UUID(tenant.id),
            uuid.UUID(sid),
        )
    async with worker_ctx(s) as ctx:
        result = await compress_busy_sessions(ctx)
    assert result["enqueued"] >= 1
    await run_burst_worker(s)
    mem = await memory(client, sid)
    assert mem["l2"] and mem["compression"]["status"] == "succeeded"


async def test_cron_pass_enqueues_busy_session_without_job_row(
    client: httpx.AsyncClient, settings: Settings, app: Any, tenant: Any, fake_llm: FakeLLMServer
) -> None:
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    await drain_queue(settings)
    async with app.state.loom.db_connection() as conn:
        await conn.execute(
            "DELETE FROM compression_jobs WHERE tenant_id = $1 AND session_id = $2",
            uuid.UUID(tenant.id),
            uuid.UUID(sid),
        )
    s = llm_settings(settings, fake_llm)
    assert s.redis_url
    async with worker_ctx(s) as ctx:
        result = await compress_busy_sessions(ctx)
    assert result["busy"] >= 1
    await run_burst_worker(s)
    assert (await memory(client, sid))["l2"]


async def test_status_shows_failed_job_with_last_error(
    client: httpx.AsyncClient, settings: Settings, app: Any, tenant: Any, fake_llm: FakeLLMServer
) -> None:
    await drain_queue(settings)
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    # A database that refuses the job's writes: the memory table is locked by us.
    s = llm_settings(settings, fake_llm, compress_max_tries=2, compress_job_timeout_seconds=1.0)
    async with app.state.loom.db_connection() as locker, locker.transaction():
        await locker.execute(
            "SELECT 1 FROM memory_states WHERE tenant_id = $1 AND session_id = $2 FOR UPDATE",
            uuid.UUID(tenant.id),
            uuid.UUID(sid),
        )
        await run_burst_worker(s)
    mem = await memory(client, sid)
    assert mem["compression"]["status"] == "failed"
    assert "TimeoutError" in mem["compression"]["last_error"]
    assert mem["l2"] == []


async def test_append_to_a_session_whose_job_is_pending_enqueues_nothing_more(
    client: httpx.AsyncClient, settings: Settings, app: Any
) -> None:
    """A queued job plans when it runs: more turns on the busy session don't re-enqueue
    (no extra transaction, no Redis call), so the job row keeps its first enqueue time."""
    await drain_queue(settings)
    sid = await new_session(client)
    for n in range(7):
        await append(client, sid, exchange(n))
    first = (await memory(client, sid))["compression"]
    assert first["status"] == "pending" and first["enqueued_at"]
    for n in range(7, 10):
        await append(client, sid, exchange(n))
    again = (await memory(client, sid))["compression"]
    assert again["status"] == "pending" and again["enqueued_at"] == first["enqueued_at"]
    assert await app.state.loom.redis.zcard(settings.queue_name) == 1

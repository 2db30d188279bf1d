"""kill -9 of the worker during a slowed fact extraction, then a new worker: the facts are
exactly those of an uninterrupted run (none lost, none doubled, one version each).

Real worker processes (`python -m app.launcher.cli worker`) on the run's database and a private
redis-server; the model is the fake Anthropic server, slowed, then hung mid-job."""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from app.core.config import Settings
from app.main import create_app
from tests.facts.support import FactModel, Rule
from tests.fakes.llm_server import FakeLLMServer, Hang, ToolUse
from tests.faults.test_worker_faults import log_tail, start_worker, stop, wait_for, worker_env
from tests.support.live import PrivateRedis

pytestmark = pytest.mark.slow

DEFAULTS = Settings()
N_FACTS = 15


@pytest.fixture
async def facts_api(
    settings: Settings, tenant: Any, private_redis: PrivateRedis
) -> AsyncIterator[Any]:
    """A client factory on an API whose Redis is the private server (service key)."""
    # appends schedule extraction (issue 27): only at once past min_batch, never by quiet
    application = create_app(
        settings.model_copy(
            update={
                "redis_url": private_redis.url,
                "db_pool_size": 4,
                "facts_quiet_seconds": 3600.0,
            }
        )
    )
    clients: list[httpx.AsyncClient] = []

    def for_agent(agent: str) -> httpx.AsyncClient:
        c = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application),
            base_url="http://test",
            timeout=30,
            headers={"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": agent},
        )
        clients.append(c)
        return c

    async with application.router.lifespan_context(application):
        yield for_agent
        for c in clients:
            await c.aclose()


async def conversation(api: httpx.AsyncClient, min_batch: int | None = None) -> str:
    facts: dict[str, Any] = {"enabled": True}
    if min_batch is not None:
        facts["min_batch"] = min_batch
    sid = (
        await api.post("/v1/sessions", json={"config": {"l1_max_messages": 200, "facts": facts}})
    ).json()["id"]
    filler = " ".join(f"detail{i}" for i in range(40))
    msgs = []
    for n in range(N_FACTS):
        msgs += [
            {
                "role": "user",
                "content": f"I own widget w{n}, {filler}",
                "created_at": f"2026-03-01T09:{2 * n:02d}:00Z",
            },
            {
                "role": "assistant",
                "content": f"Noted widget w{n}.",
                "created_at": f"2026-03-01T09:{2 * n + 1:02d}:00Z",
            },
        ]
    r = await api.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    return str(sid)


async def status(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    return dict((await api.get(f"/v1/sessions/{sid}/memory/extract")).json())


async def facts_of(api: httpx.AsyncClient) -> list[tuple[Any, ...]]:
    r = await api.post(
        "/v1/memory-items/query",
        params={"include_invalidated": "true"},
        json={"filters": {"kind": "fact"}, "limit": 500},
    )
    return sorted(
        (f["text"], tuple(f["source_seqs"]), f["version"], f["invalid_at"], f["valid_from"])
        for f in r.json()["items"]
    )


async def test_kill_9_mid_extraction_then_restart_gives_the_uninterrupted_result(
    facts_api: Any,
    settings: Settings,
    private_redis: PrivateRedis,
    fake_llm: FakeLLMServer,
    db: Any,
) -> None:
    model = FactModel(
        [
            Rule(f"I own widget w{n},", f"The user owns widget w{n}.", f"w{n}")
            for n in range(N_FACTS)
        ]
    )
    # small batches so the job commits some before it is killed; the model is slowed
    env = worker_env(
        settings, private_redis, fake_llm, LOOM_FACTS_INPUT_TOKENS="500", LOOM_DB_POOL_SIZE="4"
    )
    killed_api, control_api = facts_api("agent-k"), facts_api("agent-c")
    sid = await conversation(killed_api)
    control = await conversation(control_api, min_batch=10_000)  # extracted after, on demand

    fake_llm.script(*[ToolUse(model, delay=0.3) for _ in range(4)])
    fake_llm.set_default(Hang(None, then=ToolUse(model)))
    first = start_worker(env)
    second = None
    try:
        r = await killed_api.post(f"/v1/sessions/{sid}/memory/extract")
        assert r.status_code == 202, r.text

        async def hung() -> bool:
            return len(fake_llm.requests) >= 5

        try:
            await wait_for(hung, 60, "the worker to be caught mid-extraction")
        except AssertionError:
            print(log_tail(first))
            raise
        mid = await status(killed_api, sid)
        assert mid["status"] == "running" and 0 < mid["watermark_seq"] < 2 * N_FACTS, mid
        committed = len(await facts_of(killed_api))
        assert 0 < committed < N_FACTS
        # the calls behind the committed facts are counted already (each call's usage is
        # committed as it returns; the worker also asks the model for summaries, so the
        # fake's request list is no exact count of fact calls)
        counted = mid["llm_calls"]
        assert counted >= 1, mid
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        killed = time.monotonic()

        fake_llm.reset()
        fake_llm.respond_with_tools(model, delay=0.1)
        second = start_worker(env)

        async def done() -> dict[str, Any] | None:
            s = await status(killed_api, sid)
            return s if s["status"] == "succeeded" else None

        after = await wait_for(
            done,
            DEFAULTS.job_recovery_seconds + 60,
            "the new worker to finish the dead worker's extraction",
        )
        print(
            f"\nextraction resumed and finished {time.monotonic() - killed:.1f}s after the "
            f"kill ({committed} facts were committed before it)"
        )
        assert after["watermark_seq"] == 2 * N_FACTS and after["attempts"] >= 2
        # the killed attempt's calls still count, beside the new worker's (issue 27, 9)
        second_calls = sum(1 for r in fake_llm.requests if r.tool_name)
        assert second_calls >= 1 and after["llm_calls"] >= counted + second_calls, after

        # the uninterrupted run of the same conversation (another agent, same model)
        r = await control_api.post(f"/v1/sessions/{control}/memory/extract")
        assert r.status_code == 202

        async def control_done() -> bool:
            return (await status(control_api, control))["status"] == "succeeded"

        await wait_for(control_done, 60, "the control extraction")
    finally:
        for proc in (first, second):
            if proc is not None:
                stop(proc)

    got, want = await facts_of(killed_api), await facts_of(control_api)
    assert len(got) == N_FACTS
    assert got == want
    assert all(v == 1 and invalid is None for _, _, v, invalid, _ in got)
    versions = (
        await db.execute(
            sa.text(
                "SELECT count(*), count(DISTINCT item_id) FROM memory_item_versions v "
                "JOIN memory_items i ON i.tenant_id = v.tenant_id AND i.id = v.item_id "
                "WHERE i.tenant_id = (SELECT tenant_id FROM sessions WHERE id = :s) "
                "AND i.source_session_id = :s"
            ),
            {"s": sid},
        )
    ).one()
    assert tuple(versions) == (N_FACTS, N_FACTS)  # one 'add' version each, no duplicate

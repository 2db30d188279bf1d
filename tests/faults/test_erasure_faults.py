"""kill -9 mid-erasure (issue 28): an API process killed while it erases a user in the
request, then a worker killed while it carries the same erasure on; the next worker
completes it. Same erasure id, and the receipt counts exactly what was there.

The API and the workers are real processes (`loom-memory serve`, `python -m app.cli
worker`) on the run's test database and its Redis, with their own queue; erasure batches
are small and paced so the kills land mid-way."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
import uuid
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from app.core.config import Settings
from tests.faults.test_worker_faults import log_tail, start_worker
from tests.support.live import live_api, serving_processes, settings_env

pytestmark = pytest.mark.slow

SESSIONS, PER_SESSION = 3, 600
PACE: dict[str, str] = {
    "LOOM_ERASURE_BATCH": "60",
    "LOOM_ERASURE_PAUSE_SECONDS": "0.08",
    "LOOM_ERASURE_INLINE_MESSAGES": "1000000",
    "LOOM_ERASURE_RECOVERY_SECONDS": "2",
    "LOOM_JOB_RECOVERY_SECONDS": "3",
}


async def erasure_row(db: Any, tenant_id: str) -> Any:
    row = (
        await db.execute(
            sa.text(
                "SELECT id, status, counts FROM erasures WHERE tenant_id = :t ORDER BY started_at "
                "DESC LIMIT 1"
            ),
            {"t": tenant_id},
        )
    ).first()
    await db.rollback()
    return row


async def until(db: Any, tenant_id: str, ok: Any, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        row = await erasure_row(db, tenant_id)
        if row is not None and ok(row):
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def kill(proc: subprocess.Popen[Any]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


async def test_kill_the_api_then_the_worker_mid_erasure(
    settings: Settings, tenant: Any, db: Any
) -> None:
    ours = settings.model_copy(update={"queue_name": f"loom:erase-faults:{uuid.uuid4().hex[:8]}"})
    user = f"k9-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "a"}
    workers: list[subprocess.Popen[Any]] = []
    with live_api(ours, 1, worker=False, **PACE) as base:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as api:
            for _ in range(SESSIONS):
                sid = (await api.post("/v1/sessions", json={"user_id": user})).json()["id"]
                r = await api.post(
                    f"/v1/sessions/{sid}/messages",
                    json={
                        "messages": [
                            {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
                            for i in range(PER_SESSION)
                        ]
                    },
                )
                assert r.status_code == 201, r.text
            r = await api.post(
                "/v1/memory-items", json={"scope": f"user/{user}", "kind": "fact", "text": "a fact"}
            )
            assert r.status_code == 201
            erase = asyncio.create_task(api.delete(f"/v1/users/{user}"))
            first = await until(
                db,
                tenant.id,
                lambda r: r.counts.get("messages", 0) >= 200,
                30,
                "the API to erase some messages",
            )
            # kill -9 the API in the middle of the request's erasure
            procs = [p for p in serving_processes(base)]
            assert procs, "no API process found"
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGKILL)
            with contextlib.suppress(Exception):
                await erase
    mid = await erasure_row(db, tenant.id)
    assert mid.id == first.id and mid.status == "running"
    assert mid.counts["messages"] < SESSIONS * PER_SESSION
    env = settings_env(ours, **PACE)
    try:
        workers.append(start_worker(env))
        # the sweep resumes it; kill -9 this worker too once it has made progress
        await until(
            db,
            tenant.id,
            lambda r: r.counts.get("messages", 0) >= mid.counts["messages"] + 180,
            60,
            "the worker to resume the erasure",
        )
        kill(workers[0])
        again = await erasure_row(db, tenant.id)
        assert again.status == "running", log_tail(workers[0])
        workers.append(start_worker(env))
        done = await until(
            db,
            tenant.id,
            lambda r: r.status == "completed",
            90,
            "the second worker to complete the erasure",
        )
    except AssertionError:
        print(*(log_tail(w) for w in workers))
        raise
    finally:
        for w in workers:
            if w.poll() is None:
                kill(w)
    assert done.id == first.id
    counts = done.counts
    assert counts["sessions"] == SESSIONS and counts["messages"] == SESSIONS * PER_SESSION
    assert counts["memory_states"] == SESSIONS and counts["facts"] == 1
    left = (
        await db.execute(
            sa.text(
                "SELECT (SELECT count(*) FROM sessions WHERE tenant_id = :t AND user_id = :u) + "
                "(SELECT count(*) FROM memory_items WHERE tenant_id = :t AND scope_id = :u) + "
                "(SELECT count(*) FROM messages m WHERE m.tenant_id = :t)"
            ),
            {"t": tenant.id, "u": user},
        )
    ).scalar_one()
    assert left == 0

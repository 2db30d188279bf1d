"""The worker's retention sweep of context manifests: the newest N builds per session,
none older than T days; a pass is bounded and idempotent; the cron is registered."""

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from app.manifests.tasks import sweep_context_manifests
from tests.support.api import new_session
from tests.support.worker import worker_ctx

TURN = [
    {"role": "user", "content": "Where is the invoice?"},
    {"role": "assistant", "content": "In the billing folder."},
]


async def _record(client: Any, sid: str, n: int) -> list[str]:
    out = []
    for _ in range(n):
        r = await client.post(f"/v1/sessions/{sid}/context", json={})
        assert r.status_code == 200 and r.json()["recorded"], r.text
        out.append(r.json()["context_id"])
    return out


async def _ids(db: Any, sid: str) -> list[str]:
    rows = await db.execute(
        sa.text(
            "SELECT id FROM context_manifests WHERE session_id = :s "
            "ORDER BY created_at DESC, id DESC"
        ),
        {"s": sid},
    )
    return [str(r[0]) for r in rows]


async def test_sweep_keeps_the_newest_per_session_and_drops_old_ones(settings, client, db):
    a = await new_session(client, audit=True)
    b = await new_session(client, audit=True)
    for sid in (a, b):
        await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURN})
    in_a = await _record(client, a, 6)
    in_b = await _record(client, b, 2)
    # b's oldest build is 40 days old
    await db.execute(
        sa.text("UPDATE context_manifests SET created_at = :t WHERE id = :i"),
        {"t": datetime.now(UTC) - timedelta(days=40), "i": in_b[0]},
    )
    await db.commit()
    swept = settings.model_copy(
        update={
            "context_manifests_keep": 4,
            "context_manifests_days": 30.0,
            "context_manifests_sweep_batch": 10_000,
        }
    )
    async with worker_ctx(swept) as ctx:
        counts = await sweep_context_manifests(ctx)
        assert counts["expired"] >= 1 and counts["over_keep"] >= 2
        assert await _ids(db, a) == list(reversed(in_a))[:4]
        assert await _ids(db, b) == [in_b[1]]
        # a swept build is gone from the API too; a kept one is still there
        r = await client.get(f"/v1/sessions/{a}/contexts/{in_a[0]}")
        assert r.status_code == 404
        assert (await client.get(f"/v1/sessions/{a}/contexts/{in_a[-1]}")).status_code == 200
        # idempotent: nothing more to do for these sessions
        await sweep_context_manifests(ctx)
    assert len(await _ids(db, a)) == 4 and len(await _ids(db, b)) == 1


async def test_a_pass_is_bounded_and_zero_turns_a_limit_off(settings, client, db):
    sid = await new_session(client, audit=True)
    await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURN})
    await _record(client, sid, 5)
    no_limits = {"context_manifests_keep": 0, "context_manifests_days": 0.0}
    async with worker_ctx(settings.model_copy(update=no_limits)) as off:
        assert await sweep_context_manifests(off) == {"expired": 0, "over_keep": 0}
    assert len(await _ids(db, sid)) == 5
    small = {
        "context_manifests_keep": 1,
        "context_manifests_days": 0.0,
        "context_manifests_sweep_batch": 2,
    }
    async with worker_ctx(settings.model_copy(update=small)) as bounded:
        counts = await sweep_context_manifests(bounded)
        # at most 2 rows a pass (of this session or of another test's in the same database)
        assert counts["over_keep"] <= 2 and len(await _ids(db, sid)) >= 3
        while (await sweep_context_manifests(bounded))["over_keep"]:
            pass
    assert len(await _ids(db, sid)) == 1


def test_the_worker_runs_the_sweep_on_a_cron():
    from workers.settings import WorkerSettings

    names = [getattr(c.coroutine, "__name__", "") for c in WorkerSettings.cron_jobs]
    assert "sweep_context_manifests" in names

"""kill -9 of the API under recorded builds (issue 30): every build whose answer a client
got has its manifest row committed. Sixteen clients build contexts of sessions with
`config.audit` on against a real `loom-memory serve`; the API is killed mid-load, and each
`context_id` that came back in a 200 is then looked up in `context_manifests`.

A trigger makes each of this tenant's manifest inserts take 20 ms, so the kill always lands
while rows wait to be written: a service that answered before its row was committed
would lose some of them here (checked by making the write fire-and-forget: rows go
missing)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from app.core.config import Settings
from tests.support.live import live_api, serving_processes

pytestmark = pytest.mark.slow

CLIENTS, SESSIONS, ANSWERED = 16, 8, 60

_SLOW = (
    "CREATE OR REPLACE FUNCTION loom_test_slow_manifest() RETURNS trigger LANGUAGE plpgsql "
    "AS $$ BEGIN PERFORM pg_sleep(0.02); RETURN NEW; END $$",
    "CREATE TRIGGER loom_test_slow_manifest BEFORE INSERT ON context_manifests FOR EACH ROW "
    "WHEN (NEW.tenant_id = '{tenant}') EXECUTE FUNCTION loom_test_slow_manifest()",
)
_FAST = (
    "DROP TRIGGER IF EXISTS loom_test_slow_manifest ON context_manifests",
    "DROP FUNCTION IF EXISTS loom_test_slow_manifest()",
)


async def test_every_answered_build_is_recorded_after_a_kill_9(
    settings: Settings, tenant: Any, db: Any
) -> None:
    answered: list[str] = []
    for sql in _SLOW:
        await db.execute(sa.text(sql.format(tenant=uuid.UUID(tenant.id))))
    await db.commit()
    try:
        failed = await _load_and_kill(settings, tenant, answered)
    finally:
        for sql in _FAST:
            await db.execute(sa.text(sql))
        await db.commit()
    assert failed > 0, "no build was in flight when the API was killed"
    stored = {
        str(r[0])
        for r in (
            await db.execute(
                sa.text("SELECT id FROM context_manifests WHERE tenant_id = :t"),
                {"t": uuid.UUID(tenant.id)},
            )
        ).all()
    }
    missing = [c for c in answered if c not in stored]
    assert not missing, f"{len(missing)} of {len(answered)} answered builds have no manifest"


async def _load_and_kill(settings: Settings, tenant: Any, answered: list[str]) -> int:
    """Sixteen clients build until `ANSWERED` answers came back, then the API is killed;
    the builds that failed (were in flight, or came after)."""
    headers = {"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "a"}
    failed = 0
    with live_api(settings, 1) as base:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as api:
            sids = []
            for n in range(SESSIONS):
                r = await api.post("/v1/sessions", json={"config": {"audit": True}})
                sid = r.json()["id"]
                r = await api.post(
                    f"/v1/sessions/{sid}/messages",
                    json={
                        "messages": [
                            {"role": "user" if i % 2 == 0 else "assistant", "content": f"s{n} m{i}"}
                            for i in range(12)
                        ]
                    },
                )
                assert r.status_code == 201, r.text
                sids.append(sid)
            enough = asyncio.Event()

            async def client(k: int) -> None:
                nonlocal failed
                i = k
                while True:
                    try:
                        r = await api.post(f"/v1/sessions/{sids[i % SESSIONS]}/context", json={})
                    except httpx.HTTPError:
                        failed += 1
                        return
                    assert r.status_code == 200, r.text
                    assert r.json()["recorded"] is True
                    answered.append(r.json()["context_id"])
                    if len(answered) >= ANSWERED:
                        enough.set()
                    i += 1

            tasks = [asyncio.create_task(client(k)) for k in range(CLIENTS)]
            await asyncio.wait_for(enough.wait(), 60)
            # kill -9 the API while builds are in flight
            for p in serving_processes(base):
                with contextlib.suppress(Exception):
                    p.send_signal(signal.SIGKILL)
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
    return failed

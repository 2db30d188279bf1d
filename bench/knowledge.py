"""Knowledge-tier latency: query, context package and create (with the eviction check).

Seeds one tenant with a full project (1,000 items), 300 global and 50 task items, then
times requests through the real app in-process (httpx ASGI transport, real PostgreSQL
and Redis; no network hop). Prints a table and writes bench/results/knowledge.json.

    .venv/bin/python bench/knowledge.py [--n 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx

from app.core.config import Settings
from app.core.db import transaction
from app.launcher.migrate import upgrade
from app.main import create_app
from app.state import app_state

PG = "postgresql://postgres@127.0.0.1:5432"
WORDS = "cache index schema deploy retry token budget latency queue worker shard".split()


def _rows(tenant_id: uuid.UUID, kind: str, sid: str, n: int, rng: random.Random) -> list[dict]:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        {
            "id": uuid.uuid4(),
            "tenant_id": tenant_id,
            "scope_kind": kind,
            "scope_id": sid,
            "kind": rng.choice(["decision", "convention", "failure", "pattern"]),
            "source": "bench",
            "tags": rng.sample(WORDS, 2),
            "importance": rng.random(),
            "text": " ".join(rng.choices(WORDS, k=rng.randint(5, 60))),
            "payload": None,
            "token_cost": rng.randint(8, 70),
            "created_at": t0 + timedelta(seconds=i),
            "updated_at": t0,
        }
        for i in range(n)
    ]


async def _time(n: int, fn) -> dict[str, float]:
    for _ in range(10):
        await fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return {
        "p50_ms": statistics.median(samples),
        "p99_ms": samples[int(len(samples) * 0.99) - 1],
        "n": n,
    }


async def main(n: int) -> dict:
    name = f"loom_bench_kn_{secrets.token_hex(3)}"
    conn = await asyncpg.connect(f"{PG}/postgres")
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    try:
        await asyncio.to_thread(upgrade, url)
        admin = "lm_bench_" + secrets.token_urlsafe(16)
        app = create_app(
            Settings(DATABASE_URL=url, REDIS_URL="redis://127.0.0.1:6379/0", LOOM_ADMIN_KEY=admin)
        )
        async with app.router.lifespan_context(app):
            tr = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=tr, base_url="http://b", headers={"Authorization": f"Bearer {admin}"}
            ) as a:
                tid = (await a.post("/v1/tenants", json={"name": "bench"})).json()["id"]
                key = (
                    await a.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
                ).json()["secret"]
            rng = random.Random(1)
            rows = (
                _rows(uuid.UUID(tid), "project", "p1", 1000, rng)
                + _rows(uuid.UUID(tid), "global", "", 300, rng)
                + _rows(uuid.UUID(tid), "task", "t1", 50, rng)
            )
            async with transaction(app_state(app).db_connection) as conn:
                await conn.copy_records_to_table(
                    "memory_items",
                    records=[tuple(r.values()) for r in rows],
                    columns=list(rows[0]),
                )
            async with httpx.AsyncClient(
                transport=tr, base_url="http://b", headers={"Authorization": f"Bearer {key}"}
            ) as c:

                async def query():
                    r = await c.post(
                        "/v1/memory-items/query",
                        json={
                            "filters": {
                                "scope": "project/p1",
                                "tags": ["cache", "retry"],
                                "importance": {"$gte": 0.5},
                            },
                            "order_by": "importance",
                            "limit": 20,
                        },
                    )
                    assert r.status_code == 200

                async def package():
                    r = await c.post(
                        "/v1/context-packages",
                        json={"task_id": "t1", "project_id": "p1", "budget_tokens": 4000},
                    )
                    assert r.status_code == 200

                async def create():
                    r = await c.post(
                        "/v1/memory-items",
                        json={
                            "scope": "project/p1",
                            "kind": "note",
                            "text": "bench item",
                            "importance": 0.99,
                        },
                    )
                    assert r.status_code == 201

                async def floor():
                    r = await c.get("/v1/memory-items/" + str(rows[0]["id"]))
                    assert r.status_code in (200, 404)

                return {
                    "get_item_floor": await _time(n, floor),
                    "query": await _time(n, query),
                    "context_package": await _time(n, package),
                    "create_with_eviction_check": await _time(n, create),
                }
    finally:
        conn = await asyncpg.connect(f"{PG}/postgres")
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    res = asyncio.run(main(ap.parse_args().n))
    floor = res["get_item_floor"]["p50_ms"]
    print(f"{'operation':30} {'p50 ms':>8} {'p99 ms':>8} {'x floor':>8}")
    for k, v in res.items():
        print(f"{k:30} {v['p50_ms']:8.2f} {v['p99_ms']:8.2f} {v['p50_ms'] / floor:8.2f}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "knowledge.json").write_text(json.dumps(res, indent=2))

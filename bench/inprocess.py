"""The hot paths' time per request in one process, with no HTTP server or wrk: the context
build and the append through the ASGI app (httpx's ASGITransport), one client, on a fresh
database with one session of 50 messages. For A/B checks of a refactoring on a busy machine
(run it from two checkouts in turn, several rounds): it measures the app's own work, not
the server's. `cpu` is this process's CPU time per request (what other processes on the
machine barely move), `wall` the elapsed time.

    .venv/bin/python -m bench.inprocess --rounds 400
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import time
import uuid

import asyncpg
import httpx

ADMIN_DSN = os.environ.get("LOOM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("LOOM_TEST_REDIS", "redis://127.0.0.1:6379/0")


def _migrate(url: str) -> None:
    try:
        from app.launcher.migrate import upgrade
    except ImportError:  # a checkout from before the launcher package
        from app.migrate import upgrade  # type: ignore[no-redef]
    upgrade(url)


async def main(rounds: int) -> None:
    from app.core.config import Settings
    from app.main import create_app

    name = f"loom_inproc_{uuid.uuid4().hex[:8]}"
    admin_conn = await asyncpg.connect(ADMIN_DSN)
    await admin_conn.execute(f'CREATE DATABASE "{name}"')
    await admin_conn.close()
    url = ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://") + "/" + name
    try:
        await asyncio.to_thread(_migrate, url)
        admin = "lm_" + secrets.token_urlsafe(32)
        app = create_app(
            Settings(
                DATABASE_URL=url,
                REDIS_URL=REDIS,
                LOOM_ADMIN_KEY=admin,
                LOOM_QUEUE_NAME=f"loom:inproc:{name}",
            )
        )
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                h = {"Authorization": f"Bearer {admin}"}
                tenant = (await c.post("/v1/tenants", json={"name": name}, headers=h)).json()
                key = (
                    await c.post(
                        "/v1/api-keys",
                        headers=h,
                        json={"tenant_id": tenant["id"], "role": "agent", "agent_id": "a"},
                    )
                ).json()
                c.headers["Authorization"] = f"Bearer {key['secret']}"
                sid = (await c.post("/v1/sessions", json={})).json()["id"]
                words = " ".join(["lorem ipsum dolor sit amet"] * 30)
                for i in range(25):
                    await c.post(
                        f"/v1/sessions/{sid}/messages",
                        json={
                            "messages": [
                                {"role": "user", "content": f"q{i} {words}"},
                                {"role": "assistant", "content": f"a{i} {words}"},
                            ]
                        },
                    )
                times: dict[str, list[tuple[float, float]]] = {"context": [], "append": []}
                for i in range(rounds):
                    t, cpu = time.perf_counter(), time.process_time()
                    r = await c.post(f"/v1/sessions/{sid}/context", json={})
                    times["context"].append((time.perf_counter() - t, time.process_time() - cpu))
                    assert r.status_code == 200, r.text
                    t, cpu = time.perf_counter(), time.process_time()
                    r = await c.post(
                        f"/v1/sessions/{sid}/messages",
                        json={
                            "messages": [
                                {"role": "user" if i % 2 else "assistant", "content": f"m{i}"}
                            ]
                        },
                    )
                    times["append"].append((time.perf_counter() - t, time.process_time() - cpu))
                    assert r.status_code == 201, r.text
        for op, pairs in times.items():
            pairs = pairs[rounds // 10 :]  # warm-up left out
            wall = statistics.median(p[0] for p in pairs) * 1e3
            cpu = statistics.mean(p[1] for p in pairs) * 1e3
            print(f"{op}: cpu mean {cpu:.3f} ms, wall p50 {wall:.2f} ms")
    finally:
        admin_conn = await asyncpg.connect(ADMIN_DSN)
        await admin_conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin_conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=400)
    asyncio.run(main(parser.parse_args().rounds))

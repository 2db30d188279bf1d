"""The hot paths' time per request in one process, with no HTTP server or wrk: the context
build and the append through the ASGI app (httpx's ASGITransport), one client, on a fresh
database with one session of 50 messages. For A/B checks of a refactoring on a busy machine
(run it from two checkouts in turn, several rounds): it measures the app's own work, not
the server's. `cpu` is this process's CPU time per request (what other processes on the
machine barely move), `wall` the elapsed time.

    .venv/bin/python -m bench.inprocess --rounds 400
    .venv/bin/python -m bench.inprocess --rounds 200 --batch 20 --profile 25

`--batch N` appends N messages a request (`bench.run`'s conversation bodies, as its "append
batches of 20" figure sends) instead of one short message, and prints the CPU per message
too. `--profile K` runs the append requests under cProfile and prints the K functions with
the most own time (per message, in microseconds; cProfile roughly doubles the time of
Python-heavy code, so read the shares, not the totals). `BENCH_SOURCE=/path/to/a/checkout`
runs that checkout's app with this virtualenv (as `bench.startup` does; the request bodies
stay this checkout's), for a before/after in one sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import secrets
import statistics
import sys
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


def _top(profile: cProfile.Profile, messages: int, k: int) -> None:
    """The `k` functions with the most own time, in microseconds per message."""
    stats = pstats.Stats(profile)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:k]  # type: ignore[attr-defined]
    print(f"cProfile: {total / messages * 1e6:.1f} us/msg of own time in all; top {k}:")
    for (path, line, name), (_cc, calls, own, cum, _callers) in rows:
        where = f"{path.rsplit('/', 2)[-2:][-1] if '/' in path else path}:{line}"
        print(
            f"  {own / messages * 1e6:8.2f} us/msg own {cum / messages * 1e6:8.2f} cum "
            f"{calls / messages:6.2f} calls/msg  {name} ({where})"
        )


async def main(rounds: int, batch: int = 1, profile: int = 0) -> None:
    from bench.run import conversation  # before another checkout goes first on the path

    if os.environ.get("BENCH_SOURCE"):
        sys.path.insert(0, os.environ["BENCH_SOURCE"])
    from app.core.config import Settings
    from app.main import create_app

    print(f"app from {os.path.dirname(os.path.dirname(sys.modules['app'].__file__ or ''))}")

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
                rng = random.Random(5)
                bodies = [{"messages": conversation(rng, batch)} for _ in range(5)]
                prof = cProfile.Profile() if profile else None
                times: dict[str, list[tuple[float, float]]] = {"context": [], "append": []}
                for i in range(rounds):
                    t, cpu = time.perf_counter(), time.process_time()
                    r = await c.post(f"/v1/sessions/{sid}/context", json={})
                    times["context"].append((time.perf_counter() - t, time.process_time() - cpu))
                    assert r.status_code == 200, r.text
                    body = (
                        bodies[i % len(bodies)]
                        if batch > 1
                        else {
                            "messages": [
                                {"role": "user" if i % 2 else "assistant", "content": f"m{i}"}
                            ]
                        }
                    )
                    if prof is not None and i >= rounds // 10:
                        prof.enable()
                    t, cpu = time.perf_counter(), time.process_time()
                    r = await c.post(f"/v1/sessions/{sid}/messages", json=body)
                    times["append"].append((time.perf_counter() - t, time.process_time() - cpu))
                    if prof is not None:
                        prof.disable()
                    assert r.status_code == 201, r.text
        for op, pairs in times.items():
            pairs = pairs[rounds // 10 :]  # warm-up left out
            wall = statistics.median(p[0] for p in pairs) * 1e3
            cpu = statistics.mean(p[1] for p in pairs) * 1e3
            per = f", {cpu / batch * 1e3:.1f} us/msg" if op == "append" and batch > 1 else ""
            print(f"{op}: cpu mean {cpu:.3f} ms{per}, wall p50 {wall:.2f} ms")
        if prof is not None:
            _top(prof, (rounds - rounds // 10) * batch, profile)
    finally:
        admin_conn = await asyncpg.connect(ADMIN_DSN)
        await admin_conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin_conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--batch", type=int, default=1, help="messages per append request")
    parser.add_argument("--profile", type=int, default=0, help="print the top K under cProfile")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.batch, args.profile))

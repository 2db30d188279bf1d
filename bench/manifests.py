"""Context build throughput with audit on against off (issue 30: at most 10% slower at 32
clients).

Two sets of sessions with the same 50-message conversations, one with `config.audit` on
(every build stores its manifest row before answering), one without. An arq worker
compresses them first, then stops (as in bench/run.py). The API runs as one process
(`loom-memory serve --no-worker --workers 1`); wrk drives it at 32 clients, alternating
off / on for `--rounds` rounds of `--seconds` each (after a 1 s warm-up per measurement),
so drift from other load on the machine falls on both; the ratio is the median of the
rounds' on/off ratios. Also one client's p50 per mode, and
the CPU each request costs the API process and its PostgreSQL backends (from /proc): the
figure other load on a shared machine moves least.
Prints a table and writes bench/results/manifests.json (with the rows recorded).

    .venv/bin/python -m bench.manifests [--sessions 200] [--rounds 3] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench import wrk
from bench.run import (
    _STRIP_ENV,
    PG,
    REDIS,
    ROOT,
    conversation,
    free_port,
    process_tree,
    wait_up,
)
from bench.wrk import Req

RESULTS = ROOT / "bench" / "results"


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (from /proc; gone ones count 0)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


async def backend_pids(url: str) -> list[int]:
    """The PostgreSQL backends serving the API (its pools' connections)."""
    conn = await asyncpg.connect(url)
    try:
        return [
            r[0]
            for r in await conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'loom-memory'"
            )
        ]
    finally:
        await conn.close()


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


async def main(args: argparse.Namespace) -> None:
    if wrk.binary() is None:
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    name = f"loom_bench_manifests_{secrets.token_hex(3)}"
    conn = await asyncpg.connect(PG)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = PG.rsplit("/", 1)[0] + "/" + name
    from app.launcher.migrate import upgrade

    await asyncio.to_thread(upgrade, url.replace("postgresql://", "postgresql+asyncpg://"))
    admin = "lm_bench_" + secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if k not in _STRIP_ENV}
    env.update(
        DATABASE_URL=url,
        REDIS_URL=REDIS,
        LOOM_ADMIN_KEY=admin,
        LOOM_RUN_WORKER="false",
        LOOM_MIGRATE_ON_START="false",
        LOOM_LOG_LEVEL="warning",
        LOOM_DB_POOL_SIZE="20",
        LOOM_QUEUE_NAME=f"bench:{name}",
    )
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    out: dict[str, Any] = {
        "meta": {
            "when": datetime.now(UTC).isoformat(),
            "cpus": os.cpu_count(),
            "load_generator": wrk.version(),
            "sessions": args.sessions,
            "rounds": args.rounds,
            "seconds": args.seconds,
            "loadavg_start": os.getloadavg(),
        }
    }
    try:
        api = subprocess.Popen(  # noqa: ASYNC220 (starts the servers, waits for none)
            [
                sys.executable,
                "-m",
                "app.launcher.cli",
                "serve",
                "--no-worker",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(api)
        wait_up(f"http://127.0.0.1:{port}/healthz", api)
        worker = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-m", "app.launcher.cli", "worker"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(worker)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            h = {"Authorization": f"Bearer {admin}"}
            t = (await http.post("/v1/tenants", json={"name": "bench"}, headers=h)).json()
            key = (
                await http.post(
                    "/v1/api-keys", headers=h, json={"tenant_id": t["id"], "role": "service"}
                )
            ).json()["secret"]
            hdrs = {
                "Authorization": f"Bearer {key}",
                "X-Agent-Id": "bench-agent",
                "Content-Type": "application/json",
            }
            sets: dict[str, list[str]] = {"off": [], "on": []}
            rng = random.Random(30)
            for _ in range(args.sessions):
                msgs = conversation(rng, 50)
                for mode in ("off", "on"):
                    body = {"config": {"audit": True}} if mode == "on" else {}
                    r = await http.post("/v1/sessions", json=body, headers=hdrs)
                    r.raise_for_status()
                    sid = r.json()["id"]
                    r = await http.post(
                        f"/v1/sessions/{sid}/messages", headers=hdrs, json={"messages": msgs}
                    )
                    r.raise_for_status()
                    sets[mode].append(sid)
            log(f"loaded {args.sessions} x 2 sessions of 50 messages")
        await drain(env["LOOM_QUEUE_NAME"])
        worker.terminate()
        worker.wait(timeout=30)
        conn = await asyncpg.connect(url)
        await conn.execute("VACUUM (ANALYZE)")
        await conn.close()

        body = json.dumps({"format": "anthropic"}).encode()
        reqs = {
            mode: [Req("POST", f"/v1/sessions/{s}/context", hdrs, body) for s in sids]
            for mode, sids in sets.items()
        }
        runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
        for i in range(args.rounds):
            for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
                await wrk.run(base, reqs[mode], clients=32, seconds=1)
                # CPU per request of the API process and its PostgreSQL backends: what the
                # build costs the machine, whatever else runs on it (throughput on a shared
                # machine moves with the other load)
                app_pids = process_tree(api.pid)  # serve and the worker it runs
                pg_pids = await backend_pids(url)
                cpu0 = cpu_seconds(app_pids), cpu_seconds(pg_pids)
                m = await wrk.run(base, reqs[mode], clients=32, seconds=args.seconds)
                n = max(1, m.requests)
                app_cpu = (cpu_seconds(app_pids) - cpu0[0]) * 1000 / n
                pg_cpu = (cpu_seconds(pg_pids) - cpu0[1]) * 1000 / n
                cpu = app_cpu + pg_cpu
                runs[mode].append(
                    {
                        **m.summary(),
                        "cpu_ms_per_request": round(cpu, 3),
                        "api_cpu_ms_per_request": round(app_cpu, 3),
                        "pg_cpu_ms_per_request": round(pg_cpu, 3),
                    }
                )
                log(
                    f"round {i + 1} audit {mode}: {m.rps:,.0f} req/s, p50 {m.p50_ms:.1f} ms, "
                    f"p99 {m.p99_ms:.1f} ms, errors {m.errors}, CPU {cpu:.2f} ms/request "
                    f"(API {app_cpu:.2f}, PostgreSQL {pg_cpu:.2f})"
                )
        one: dict[str, Any] = {}
        for mode in ("off", "on"):
            await wrk.run(base, reqs[mode], clients=1, seconds=1)
            one[mode] = (await wrk.run(base, reqs[mode], clients=1, seconds=args.seconds)).summary()
        conn = await asyncpg.connect(url)
        rows = await conn.fetchval("SELECT count(*) FROM context_manifests")
        size = await conn.fetchval(
            "SELECT avg(pg_column_size(manifest))::int FROM context_manifests"
        )
        await conn.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        conn = await asyncpg.connect(PG)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()

    med = {mode: statistics.median(r["rps"] for r in runs[mode]) for mode in runs}
    p99 = {mode: statistics.median(r["p99_ms"] for r in runs[mode]) for mode in runs}
    # each round measured off and on back to back: the median of the rounds' ratios is
    # what drift of the machine's speed between rounds moves least
    pairs = [on["rps"] / off["rps"] for off, on in zip(runs["off"], runs["on"], strict=True)]
    ratio = statistics.median(pairs)
    cpu = {mode: statistics.median(r["cpu_ms_per_request"] for r in runs[mode]) for mode in runs}
    out["runs_32c"] = runs
    out["one_client"] = one
    out["rows_recorded"] = rows
    out["avg_manifest_bytes"] = size
    out["summary"] = {
        "rps_32c_off": med["off"],
        "rps_32c_on": med["on"],
        "on_over_off": round(ratio, 3),
        "on_over_off_per_round": [round(x, 3) for x in pairs],
        "medians_on_over_off": round(med["on"] / med["off"], 3),
        "p99_ms_32c_off": p99["off"],
        "p99_ms_32c_on": p99["on"],
        "p50_ms_1c_off": one["off"]["p50_ms"],
        "p50_ms_1c_on": one["on"]["p50_ms"],
        "cpu_ms_per_request_off": cpu["off"],
        "cpu_ms_per_request_on": cpu["on"],
        "cpu_on_over_off": round(cpu["on"] / cpu["off"], 3),
        "target": "audit on >= 0.90 x off at 32 clients (median of the rounds' ratios)",
        "ok": ratio >= 0.9,
    }
    out["meta"]["loadavg_end"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "manifests.json").write_text(json.dumps(out, indent=2) + "\n")
    s = out["summary"]
    print(f"\ncontext build, 50-message sessions, one API process, wrk ({wrk.version()})")
    print(f"{'':28}{'audit off':>12}{'audit on':>12}{'on/off':>9}")
    print(
        f"{'32 clients, req/s (median)':28}{s['rps_32c_off']:>12,.0f}"
        f"{s['rps_32c_on']:>12,.0f}{s['on_over_off']:>9.3f}"
    )
    print(f"{'  ratio per round':28}{'':24}  " + " ".join(f"{x:.3f}" for x in pairs))
    print(
        f"{'32 clients, p99 ms (median)':28}{s['p99_ms_32c_off']:>12.1f}{s['p99_ms_32c_on']:>12.1f}"
    )
    print(f"{'1 client, p50 ms':28}{s['p50_ms_1c_off']:>12.2f}{s['p50_ms_1c_on']:>12.2f}")
    print(
        f"{'CPU ms/request (API + PG)':28}{s['cpu_ms_per_request_off']:>12.3f}"
        f"{s['cpu_ms_per_request_on']:>12.3f}{s['cpu_on_over_off']:>9.3f}"
    )
    print(
        f"target: {s['target']}: {'ok' if s['ok'] else 'MISS'}; {rows:,} manifests recorded "
        f"(avg {size} bytes stored)"
    )


async def drain(queue: str, limit: float = 600) -> None:
    """Wait until the worker has run every queued compression job."""
    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(REDIS)
    deadline = time.monotonic() + limit
    quiet = 0
    try:
        while time.monotonic() < deadline and quiet < 3:
            queued = await r.zcard(queue)
            running = len(await r.keys("arq:in-progress:compress:*"))
            quiet = quiet + 1 if queued == 0 and running == 0 else 0
            await asyncio.sleep(1)
    finally:
        await r.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    asyncio.run(main(parser.parse_args()))

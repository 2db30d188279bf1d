"""The connection budget under load (issue 36, item 3): 350 concurrent context builds on 4
and on 8 API processes (and the worker compressing the same sessions) against a PostgreSQL
that allows 100 connections.

Before the budget, 4 processes gave 44 x 503 "The database is busy", 3 connection resets and
"sorry, too many clients" in the worker; 8 processes 207 x 503 of 1,050. Each run here
starts a private PostgreSQL (`max_connections=100`) and Redis, migrates, starts
`loom-memory serve --workers N` with its worker (the plan `serve` prints is recorded), makes
sessions whose appends push them over their compression trigger, then fires `--rounds`
rounds of 350 context builds at once. It counts answers by status, transport errors,
"too many clients" in every log, the most connections PostgreSQL saw from the app, and the
resident memory of each API process (and what dominates it: the imports, measured as the
RSS of a process that only imported the app). Prints a table and writes
bench/results/connections.json.

    .venv/bin/python -m bench.connections [--processes 4 8] [--rounds 3] [--clients 350]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.run import _STRIP_ENV, ROOT, conversation, free_port, process_tree, rss_mb, wait_up
from tests.support.live import PrivatePostgres, PrivateRedis

RESULTS = ROOT / "bench" / "results"
MAX_CONNECTIONS = 100


def _imports_only_rss() -> float:
    """RSS (MiB) of a Python process that imported the app and built it, nothing served:
    the floor an API process cannot go under."""
    code = (
        "import os; from app.main import create_app; create_app(); "
        "print(int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 1024)"
    )
    env = {k: v for k, v in os.environ.items() if k not in _STRIP_ENV}
    env.update(DATABASE_URL="postgresql://x@127.0.0.1:1/x", REDIS_URL="redis://127.0.0.1:1/0")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    return float(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else float("nan")


class Sampler(threading.Thread):
    """The most connections the app held on the server, sampled every 50 ms."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.peak = 0
        self.stop_at = False

    def run(self) -> None:
        async def loop() -> None:
            conn = await asyncpg.connect(self.dsn)
            try:
                while not self.stop_at:
                    n = await conn.fetchval(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE application_name = 'loom-memory'"
                    )
                    self.peak = max(self.peak, int(n))
                    await asyncio.sleep(0.05)
            finally:
                await conn.close()

        asyncio.run(loop())


async def _prepare(base: str, admin: str, sessions: int) -> tuple[str, list[str]]:
    async with httpx.AsyncClient(base_url=base, timeout=120) as c:
        h = {"Authorization": f"Bearer {admin}"}
        t = (await c.post("/v1/tenants", json={"name": f"conn-{os.getpid()}"}, headers=h)).json()
        key = (
            await c.post("/v1/api-keys", json={"tenant_id": t["id"], "role": "service"}, headers=h)
        ).json()["secret"]
        kh = {"Authorization": f"Bearer {key}", "X-Agent-Id": "bench"}
        import random

        rng = random.Random(7)
        sids = []
        for _ in range(sessions):
            r = await c.post(
                "/v1/sessions",
                headers=kh,
                json={"config": {"max_context_tokens": 4000, "l1_max_messages": 10}},
            )
            sid = r.json()["id"]
            sids.append(sid)
            # past the compression trigger: the worker compresses while builds run
            await c.post(
                f"/v1/sessions/{sid}/messages",
                headers=kh,
                json={"messages": conversation(rng, 40)},
            )
        return key, sids


async def _round(base: str, key: str, sids: list[str], clients: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as c:
        h = {"Authorization": f"Bearer {key}", "X-Agent-Id": "bench"}

        async def one(i: int) -> None:
            try:
                r = await c.post(f"/v1/sessions/{sids[i % len(sids)]}/context", headers=h, json={})
                name = str(r.status_code)
                if r.status_code == 503:
                    name += " " + r.json()["error"]["message"]
            except httpx.HTTPError as exc:
                name = type(exc).__name__
            counts[name] = counts.get(name, 0) + 1

        await asyncio.gather(*(one(i) for i in range(clients)))
    return counts


def run_one(processes: int, rounds: int, clients: int, sessions: int) -> dict[str, Any]:
    pg, redis = PrivatePostgres(max_connections=MAX_CONNECTIONS), PrivateRedis()
    logs = Path(tempfile.mkdtemp(prefix="loom-conn-bench-"))
    port = free_port()
    admin = "lm_bench_" + os.urandom(8).hex()
    env = {k: v for k, v in os.environ.items() if k not in _STRIP_ENV}
    env.update(
        DATABASE_URL=pg.url,
        REDIS_URL=redis.url,
        LOOM_ADMIN_KEY=admin,
        LOOM_QUEUE_NAME=f"conn-bench-{port}",
        LOOM_LOG_LEVEL="warning",
    )
    out = open(logs / "serve.log", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.launcher.cli",
            "serve",
            "--workers",
            str(processes),
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    sampler = Sampler(pg.dsn)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(3):  # 8 processes on 2 busy cores take a while to come up
            try:
                wait_up(f"{base}/healthz", proc)
                break
            except RuntimeError:
                if proc.poll() is not None:
                    raise
        time.sleep(3)  # every process up
        key, sids = asyncio.run(_prepare(base, admin, sessions))
        sampler.start()
        per_round = [asyncio.run(_round(base, key, sids, clients)) for _ in range(rounds)]
        sampler.stop_at = True
        sampler.join(5)
        tree = process_tree(proc.pid)
        api = [
            p
            for p in tree
            if p != proc.pid and "worker" not in Path(f"/proc/{p}/cmdline").read_bytes().decode()
        ]
        # the N largest: the API processes (uvicorn's supervisor and spawner are small)
        rss = sorted(r for r in (rss_mb(p) for p in api) if r is not None)[-processes:]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        out.close()
        pg_log = (pg.pgdata / "log").read_text(errors="replace") if pg.pgdata.exists() else ""
        pg.stop()
        redis.stop()
    serve_log = (logs / "serve.log").read_text(errors="replace")
    plan = next((x for x in serve_log.splitlines() if x.startswith("database connections")), "")
    total: dict[str, int] = {}
    for counts in per_round:
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    return {
        "processes": processes,
        "clients": clients,
        "rounds": rounds,
        "plan": plan,
        "answers": total,
        "errors": sum(v for k, v in total.items() if k != "200"),
        "too_many_clients": serve_log.count("too many clients") + pg_log.count("too many clients"),
        "peak_app_connections": sampler.peak,
        "api_rss_mb": [round(r, 1) for r in rss],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=350)
    ap.add_argument("--sessions", type=int, default=40)
    args = ap.parse_args()
    floor = _imports_only_rss()
    rows = [run_one(n, args.rounds, args.clients, args.sessions) for n in args.processes]
    print(f"\nPostgreSQL max_connections {MAX_CONNECTIONS}; {args.clients} builds at once")
    print(
        f"{'processes':>9} {'answers':<40} {'errors':>6} {'too many':>8} {'peak conn':>9} "
        "RSS/process"
    )
    for r in rows:
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(r["answers"].items()))
        rss = r["api_rss_mb"]
        low, high = min(rss, default=0), max(rss, default=0)
        print(
            f"{r['processes']:>9} {answers:<40} {r['errors']:>6} {r['too_many_clients']:>8} "
            f"{r['peak_app_connections']:>9} {low:.0f}-{high:.0f} MiB"
        )
        print(f"{'':>9} {r['plan']}")
    print(f"an API process that only imported and built the app: {floor:.0f} MiB")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "connections.json").write_text(
        json.dumps(
            {
                "at": datetime.now(UTC).isoformat(),
                "max_connections": MAX_CONNECTIONS,
                "imports_only_rss_mb": round(floor, 1),
                "runs": rows,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()

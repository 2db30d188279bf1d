"""Loom Memory benchmark: loads 1,000 sessions x 50 messages (plus sessions of 10,000 and
100,000 messages), then measures each operation and its floor in the same run.

    .venv/bin/python -m bench.run [--quick]

Prints a table and writes bench/results/latest.json (and a timestamped copy). Uses the
machine's PostgreSQL and Redis (BENCH_PG, BENCH_REDIS to override) in a fresh database.
"""

import argparse
import asyncio
import json
import os
import random
import secrets
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench import loadgen, search_corpus

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/0")
WORDS = ("database index query latency cache memory agent session summary token budget "
         "context swap search rerank planner tool result schema migration deploy review "
         "customer invoice refund shipping warehouse forecast report dashboard metric alert "
         "incident rollback release branch test coverage python postgres redis worker queue "
         "retry backoff timeout network packet route gateway proxy cluster replica shard").split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def conversation(rng: random.Random, n: int, start: int = 0) -> list[dict[str, Any]]:
    """Realistic-ish turns (the search bench's topic corpus): user asks, assistant answers,
    every 5th turn uses a tool."""
    out: list[dict[str, Any]] = []
    i = start
    while len(out) < n:
        out.append({"role": "user", "content": search_corpus.message_text(rng, "user")})
        if i % 5 == 4 and len(out) + 2 < n:
            tid = f"tu_{i}_{rng.randrange(1 << 30)}"
            out.append({"role": "assistant", "content": [
                {"type": "text", "text": sentence(rng, 6)},
                {"type": "tool_use", "id": tid, "name": "lookup",
                 "input": {"q": sentence(rng, 4)}}]})
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid,
                 "content": sentence(rng, rng.randint(20, 80))}]})
        if len(out) < n:
            out.append({"role": "assistant",
                        "content": search_corpus.message_text(rng, "assistant")})
        i += 1
    return out[:n]


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {url}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server did not start: {url}")


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(7)
        self.db = f"loom_bench_{secrets.token_hex(3)}"
        self.admin_key = "lm_bench_" + secrets.token_urlsafe(24)
        self.procs: list[subprocess.Popen] = []
        self.results: dict[str, Any] = {}
        self.rows: list[tuple[str, str, str]] = []

    # --- setup -----------------------------------------------------------------------
    async def create_db(self) -> str:
        conn = await asyncpg.connect(PG)
        await conn.execute(f'CREATE DATABASE "{self.db}"')
        await conn.close()
        url = PG.rsplit("/", 1)[0] + "/" + self.db
        from app.migrate import upgrade

        await asyncio.to_thread(upgrade, url.replace("postgresql://", "postgresql+asyncpg://"))
        return url

    async def drop_db(self) -> None:
        conn = await asyncpg.connect(PG)
        await conn.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        await conn.close()

    def start_servers(self, db_url: str) -> None:
        self.api_port, self.floor_port = free_port(), free_port()
        # an arq worker compresses the loaded sessions, as in production, before the
        # measurements start; it is stopped while measuring (production runs workers on
        # their own machines; here they would share the 2 cores with the API)
        self.queue_name = f"bench:{self.db}"
        env = dict(os.environ, DATABASE_URL=db_url, REDIS_URL=REDIS,
                   LOOM_ADMIN_KEY=self.admin_key, LOOM_RUN_WORKER="false",
                   LOOM_MIGRATE_ON_START="false", LOOM_LOG_LEVEL="warning",
                   LOOM_DB_POOL_SIZE="20", LOOM_QUEUE_NAME=self.queue_name,
                   BENCH_FLOOR_DSN=db_url)
        py = sys.executable
        self.procs.append(subprocess.Popen(
            [py, "-m", "app.cli", "serve", "--no-worker", "--port", str(self.api_port)],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.procs.append(subprocess.Popen(
            [py, "-m", "uvicorn", "bench.floor_app:app", "--port", str(self.floor_port),
             "--log-level", "warning", "--no-access-log"],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.worker = subprocess.Popen([py, "-m", "app.cli", "worker"], env=env, cwd=ROOT,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(self.worker)
        wait_up(f"http://127.0.0.1:{self.api_port}/healthz", self.procs[0])
        wait_up(f"http://127.0.0.1:{self.floor_port}/docs", self.procs[1])

    def stop_servers(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()

    async def api(self, method: str, path: str, key: str, body: Any = None,
                  headers: dict[str, str] | None = None) -> httpx.Response:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.api_port}",
                                     timeout=120) as c:
            h = {"Authorization": f"Bearer {key}", **(headers or {})}
            return await c.request(method, path, json=body, headers=h)

    async def load(self) -> None:
        t = (await self.api("POST", "/v1/tenants", self.admin_key, {"name": "bench"})).json()
        key = (await self.api("POST", "/v1/api-keys", self.admin_key,
                              {"tenant_id": t["id"], "role": "service"})).json()
        self.key = key["secret"]
        self.headers = {"Authorization": f"Bearer {self.key}", "X-Agent-Id": "bench-agent"}
        n_sessions = 100 if self.args.quick else 1000
        t0 = time.perf_counter()
        self.sessions: list[str] = []
        for _ in range(n_sessions):
            r = await self.api("POST", "/v1/sessions", self.key, {}, {"X-Agent-Id": "bench-agent"})
            self.sessions.append(r.json()["id"])
        self.log(f"created {n_sessions} sessions")
        bodies = [json.dumps({"messages": conversation(self.rng, 50)}).encode()
                  for _ in self.sessions]
        host = f"127.0.0.1:{self.api_port}"
        res = await loadgen.run("127.0.0.1", self.api_port, lambda n: loadgen.build_request(
            "POST", f"/v1/sessions/{self.sessions[n]}/messages", host, self.headers, bodies[n]),
            clients=8, total=len(self.sessions))
        assert res.errors == 0, "loading failed"
        self.big: dict[int, str] = {}
        sizes = [50, 10_000] + ([] if self.args.quick else [100_000])
        for size in sizes:
            sid = (await self.api("POST", "/v1/sessions", self.key, {},
                                  {"X-Agent-Id": "bench-agent"})).json()["id"]
            done = 0
            batches = []
            while done < size:
                n = min(500, size - done)
                batches.append(json.dumps({"messages": conversation(self.rng, n, done)}).encode())
                done += n
            res = await loadgen.run("127.0.0.1", self.api_port,
                                    lambda n, sid=sid, b=batches: loadgen.build_request(
                                        "POST", f"/v1/sessions/{sid}/messages", host,
                                        self.headers, b[n]),
                                    clients=1, total=len(batches))
            assert res.errors == 0, "loading a long session failed"
            self.big[size] = sid
            self.log(f"loaded a session of {size} messages")
        await self.drain_queue()
        self.worker.terminate()
        self.worker.wait(timeout=30)
        # as autovacuum would on a live database: plans need statistics of the loaded data
        conn = await asyncpg.connect(self.db_url)
        await conn.execute("ANALYZE")
        await conn.close()
        self.results["load_seconds"] = round(time.perf_counter() - t0, 1)
        self.results["sessions"] = n_sessions
        self.results["messages_per_session"] = 50

    async def drain_queue(self, limit: float = 600) -> None:
        """Wait until the worker has run every queued compression job."""
        import redis.asyncio as aioredis

        r = aioredis.Redis.from_url(REDIS)
        deadline = time.monotonic() + limit
        quiet = 0
        try:
            while time.monotonic() < deadline and quiet < 3:
                queued = await r.zcard(self.queue_name)
                running = len(await r.keys("arq:in-progress:compress:*"))
                quiet = quiet + 1 if queued == 0 and running == 0 else 0
                await asyncio.sleep(1)
        finally:
            await r.aclose()
        self.log("compression queue drained" if quiet >= 3 else "queue still busy; measuring")

    # --- scenarios ---------------------------------------------------------------------
    def log(self, msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    async def measure(self, name: str, port: int, make, *, clients: int, total: int | None = None,
                      duration: float | None = None, warmup: int = 20) -> loadgen.Result:
        self.log(f"measuring {name}")
        res = await loadgen.run("127.0.0.1", port, make, clients=clients, total=total,
                                duration=duration, warmup=warmup)
        self.results[name] = res.summary()
        if res.errors:
            self.log(f"{name}: {res.errors} of {res.requests} requests failed")
        return res

    async def run(self) -> None:
        q = self.args.quick
        lat_n = 300 if q else 2000
        dur = 2.0 if q else 5.0
        api_host = f"127.0.0.1:{self.api_port}"
        floor_host = f"127.0.0.1:{self.floor_port}"
        rnd = random.Random(3)

        def floor_read(n: int) -> bytes:
            return loadgen.build_request("GET", f"/floor/sessions/{rnd.choice(self.sessions)}",
                                         floor_host, {})

        f1 = await self.measure("floor_read_1c", self.floor_port, floor_read, clients=1,
                                total=lat_n)
        f32 = await self.measure("floor_read_32c", self.floor_port, floor_read, clients=32,
                                 duration=dur)
        self.rows.append(("floor: session + last 10 messages", f"p50 {f1.pct(50):.2f} ms, "
                          f"p99 {f1.pct(99):.2f} ms", f"{f32.rps:,.0f} req/s @32"))

        # context build
        groups = set(self.args.only.split(","))
        probe = await self.api("POST", f"/v1/sessions/{self.sessions[0]}/context", self.key,
                               {"format": "anthropic"}, {"X-Agent-Id": "bench-agent"})
        if "context" in groups and probe.status_code == 200:
            for size, sid in [(50, None), *[(s, v) for s, v in self.big.items() if s > 50]]:
                body = json.dumps({"format": "anthropic"}).encode()

                def ctx(n: int, sid=sid, body=body) -> bytes:
                    target = sid or rnd.choice(self.sessions)
                    return loadgen.build_request("POST", f"/v1/sessions/{target}/context",
                                                 api_host, self.headers, body)

                c1 = await self.measure(f"context_{size}_1c", self.api_port, ctx, clients=1,
                                        total=lat_n)
                c32 = await self.measure(f"context_{size}_32c", self.api_port, ctx,
                                         clients=32, duration=dur)
                share = ratio(c32.rps, f32.rps)
                self.results[f"context_{size}_ratio_to_floor"] = round(share, 3)
                self.rows.append((f"context build, {size:,} msgs",
                                  f"p50 {c1.pct(50):.2f} ms, p99 {c1.pct(99):.2f} ms "
                                  f"(floor x{ratio(c1.pct(50), f1.pct(50)):.1f})",
                                  f"{c32.rps:,.0f} req/s @32 ({share:.2f} of floor)"))
        else:
            self.rows.append(("context build", "skipped", f"probe {probe.status_code}"))

        # appends
        one = json.dumps({"messages": [{"role": "user", "content": sentence(rnd, 20)}]}).encode()
        twenty = json.dumps({"messages": conversation(rnd, 20)}).encode()
        simple20 = json.dumps({"messages": [{"role": "user" if i % 2 == 0 else "assistant",
                                             "content": sentence(rnd, 25)} for i in
                                            range(20)]}).encode()

        def app1(n: int) -> bytes:
            return loadgen.build_request("POST", f"/v1/sessions/{rnd.choice(self.sessions)}"
                                         "/messages", api_host, self.headers, one)

        def fl1(n: int) -> bytes:
            return loadgen.build_request("POST", f"/floor/sessions/{rnd.choice(self.sessions)}"
                                         "/messages", floor_host, {}, one)

        def app20(n: int) -> bytes:
            return loadgen.build_request("POST", f"/v1/sessions/{rnd.choice(self.sessions)}"
                                         "/messages", api_host, self.headers, twenty)

        def fl20(n: int) -> bytes:
            return loadgen.build_request("POST", f"/floor/sessions/{rnd.choice(self.sessions)}"
                                         "/messages", floor_host, {}, simple20)

        if "append" in groups:
            await self.appends(api_host, floor_host, app1, fl1, app20, fl20, dur)
        await self.search_and_shared(groups, api_host, lat_n, rnd)

    async def appends(self, api_host, floor_host, app1, fl1, app20, fl20, dur) -> None:
        a1 = await self.measure("append_1_32c", self.api_port, app1, clients=32, duration=dur)
        fa1 = await self.measure("floor_append_1_32c", self.floor_port, fl1, clients=32,
                                 duration=dur)
        self.rows.append(("append 1 message", f"{a1.rps:,.0f} req/s @32 (target 1,500)",
                          f"floor {fa1.rps:,.0f} req/s ({ratio(a1.rps, fa1.rps):.2f})"))
        a20 = await self.measure("append_20_32c", self.api_port, app20, clients=32, duration=dur)
        fa20 = await self.measure("floor_append_20_32c", self.floor_port, fl20, clients=32,
                                  duration=dur)
        self.results["append_20_messages_per_s"] = round(a20.rps * 20, 1)
        self.rows.append(("append batches of 20", f"{a20.rps * 20:,.0f} msg/s @32 "
                          "(target 10,000)", f"floor {fa20.rps * 20:,.0f} msg/s "
                          f"({ratio(a20.rps, fa20.rps):.2f})"))

    async def search_and_shared(self, groups, api_host, lat_n, rnd) -> None:
        q = self.args.quick
        # BM25 search on the 10,000-message session
        sid = self.big.get(10_000)
        probe = await self.api("POST", f"/v1/sessions/{sid}/search", self.key,
                               {"query": "database latency", "rerank": False},
                               {"X-Agent-Id": "bench-agent"})
        if "search" in groups and probe.status_code == 200:
            qs = search_corpus.queries(500)

            def search(n: int) -> bytes:
                query = qs[n % len(qs)]
                return loadgen.build_request("POST", f"/v1/sessions/{sid}/search", api_host,
                                             self.headers, {"query": query, "rerank": False})

            s1 = await self.measure("search_bm25_10k_1c", self.api_port, search, clients=1,
                                    total=200 if q else 500)
            self.rows.append(("BM25 search, 10,000 msgs", f"p50 {s1.pct(50):.2f} ms, p99 "
                              f"{s1.pct(99):.2f} ms (target p50 10 ms)", "1 client"))
        else:
            self.rows.append(("BM25 search", "skipped", f"probe {probe.status_code}"))

        # shared memory: hot read and 1 MB write
        probe = await self.api("PUT", "/v1/shared-memory/global/bench-hot", self.key,
                               {"value": {"hello": "world"}}, {"X-Agent-Id": "bench-agent"})
        if "shared" in groups and probe.status_code in (200, 201):
            def hot(n: int) -> bytes:
                return loadgen.build_request("GET", "/v1/shared-memory/global/bench-hot",
                                             api_host, self.headers)

            h1 = await self.measure("shared_hot_read_1c", self.api_port, hot, clients=1,
                                    total=lat_n)
            mb = os.urandom(512 * 1024).hex().encode()  # 1 MiB of text

            def write(n: int) -> bytes:
                return loadgen.build_request("PUT", f"/v1/shared-memory/global/bench-mb-{n}",
                                             api_host, {**self.headers,
                                                        "Content-Type": "application/octet-stream"},
                                             mb)

            w1 = await self.measure("shared_write_1mb_1c", self.api_port, write, clients=1,
                                    total=30 if q else 100, warmup=0)
            self.rows.append(("shared memory", f"hot read p50 {h1.pct(50):.2f} ms "
                              "(target 0.5)", f"1 MB write p50 {w1.pct(50):.1f} ms (target 20)"))
        else:
            self.rows.append(("shared memory", "skipped", f"probe {probe.status_code}"))

    def report(self) -> None:
        width = max(len(r[0]) for r in self.rows) + 2
        print()
        print(f"{'operation':<{width}}{'latency / rate':<60}throughput / ratio")
        print("-" * (width + 100))
        for a, b, c in self.rows:
            print(f"{a:<{width}}{b:<60}{c}")
        meta = {"when": datetime.now(UTC).isoformat(), "cpus": os.cpu_count(),
                "quick": self.args.quick}
        out = {"meta": meta, "results": self.results,
               "table": [list(r) for r in self.rows]}
        results = ROOT / "bench" / "results"
        results.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        for name in (f"bench-{stamp}.json", "latest.json"):
            (results / name).write_text(json.dumps(out, indent=2) + "\n")
        print("\nwrote bench/results/latest.json")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100 sessions, shorter runs")
    parser.add_argument("--only", default="context,append,search,shared",
                        help="comma-separated groups to run after the floor")
    args = parser.parse_args()
    b = Bench(args)
    db_url = await b.create_db()
    b.db_url = db_url
    try:
        b.start_servers(db_url)
        await b.load()
        await b.run()
        b.report()
    finally:
        b.stop_servers()
        await b.drop_db()


if __name__ == "__main__":
    asyncio.run(main())

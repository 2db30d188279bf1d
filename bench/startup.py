"""How fast an API process starts (issue 44, finding 5): the cost of importing the app, and
the time from `loom-memory serve` to `/readyz` answering, on a quiet machine and again
under the kill-api fault's load (appends sent all the time, the server killed with SIGKILL
and started again five times, other processes busy on every core).

    .venv/bin/python -m bench.startup                  # quiet, then loaded
    .venv/bin/python -m bench.startup --runs 5 --kills 5 --burners 2
    BENCH_SOURCE=/path/to/an/old/checkout .venv/bin/python -m bench.startup   # another tree

Uses the machine's PostgreSQL and Redis in a fresh database (dropped at the end); prints a
table and writes bench/results/startup.json. `BENCH_SOURCE` measures another checkout of
the code with this virtualenv (its directory goes first on PYTHONPATH), for a before/after
in one sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/0")
SOURCE = Path(os.environ.get("BENCH_SOURCE", str(ROOT))).resolve()
PY = str(ROOT / ".venv" / "bin" / "python")


def _env(database: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LOOM_", "ANTHROPIC_", "OPENAI_")) and k != "DATABASE_URL"
    }
    base = PG.rsplit("/", 1)[0]
    env.update(
        DATABASE_URL=f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{database}",
        REDIS_URL=REDIS,
        LOOM_ADMIN_KEY="lm_bench_" + secrets.token_urlsafe(24),
        LOOM_QUEUE_NAME=f"loom:bench-start:{secrets.token_hex(4)}",
        PYTHONPATH=str(SOURCE),
    )
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def import_cost(runs: int, env: dict[str, str]) -> dict[str, float]:
    """Seconds and peak RSS (MiB) of `import app.main` in a fresh interpreter."""
    code = (
        "import resource, time; t = time.perf_counter(); import app.main; "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    seconds, rss = [], []
    for _ in range(runs):
        out = subprocess.run(
            [PY, "-c", code], env=env, cwd=SOURCE, capture_output=True, text=True, check=True
        ).stdout.split()
        seconds.append(float(out[0]))
        rss.append(int(out[1]) / 1024)
    return {"import_s": statistics.median(seconds), "import_rss_mib": statistics.median(rss)}


def _start(env: dict[str, str], port: int, workers: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            PY,
            "-m",
            "app.launcher.cli",
            "serve",
            "--no-worker",
            "--workers",
            str(workers),
            "--port",
            str(port),
        ],
        env=env,
        cwd=SOURCE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _until_ready(port: int, started: float, timeout: float = 120) -> float:
    with httpx.Client(timeout=2) as c:
        while time.monotonic() - started < timeout:
            try:
                if c.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
    raise TimeoutError(f"not ready after {timeout} s")


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def to_ready(env: dict[str, str], runs: int, workers: int) -> list[float]:
    """Seconds from `serve` to /readyz 200, `runs` times."""
    out = []
    for _ in range(runs):
        port = _free_port()
        started = time.monotonic()
        proc = _start(env, port, workers)
        try:
            out.append(_until_ready(port, started))
        finally:
            _stop(proc)
    return out


def _burn(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1_000_003


async def _append_load(port: int, key: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """Appends from 16 clients until `stop` (refused while the server is down)."""
    headers = {"Authorization": f"Bearer {key}", "X-Agent-Id": "bench"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
        sid = None
        while sid is None and not stop.is_set():
            try:
                sid = (await c.post("/v1/sessions", json={}, headers=headers)).json()["id"]
            except (httpx.HTTPError, KeyError, ValueError):
                await asyncio.sleep(0.1)

        async def one() -> None:
            while not stop.is_set():
                try:
                    r = await c.post(
                        f"/v1/sessions/{sid}/messages",
                        json={"messages": [{"role": "user", "content": "a line under load"}]},
                        headers=headers,
                    )
                    counts["2xx" if r.status_code < 300 else str(r.status_code)] = (
                        counts.get("2xx" if r.status_code < 300 else str(r.status_code), 0) + 1
                    )
                except httpx.HTTPError:
                    counts["refused"] = counts.get("refused", 0) + 1
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(one() for _ in range(16)))


def kills_under_load(env: dict[str, str], kills: int, burners: int) -> dict[str, Any]:
    """`serve --workers 1` killed with SIGKILL and started again `kills` times while appends
    arrive and `burners` processes keep the cores busy: seconds from each start to /readyz."""
    port = _free_port()
    stop_burn = multiprocessing.Event()
    procs = [multiprocessing.Process(target=_burn, args=(stop_burn,)) for _ in range(burners)]
    for p in procs:
        p.start()
    counts: dict[str, int] = {}
    restarts: list[float] = []
    proc = _start(env, port, 1)
    try:
        _until_ready(port, time.monotonic())
        key = _service_key(env, port)
        stop = asyncio.Event()
        loop = asyncio.new_event_loop()
        import threading

        load = threading.Thread(
            target=loop.run_until_complete, args=(_append_load(port, key, stop, counts),)
        )
        load.start()
        time.sleep(3)
        for _ in range(kills):
            _stop(proc, signal.SIGKILL)
            started = time.monotonic()
            proc = _start(env, port, 1)
            restarts.append(_until_ready(port, started))
            time.sleep(3)  # serving under load before the next kill
        loop.call_soon_threadsafe(stop.set)
        load.join(30)
    finally:
        _stop(proc)
        stop_burn.set()
        for p in procs:
            p.join(5)
    return {"restarts_s": restarts, "requests": counts}


def _service_key(env: dict[str, str], port: int) -> str:
    admin = {"Authorization": f"Bearer {env['LOOM_ADMIN_KEY']}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
        t = c.post("/v1/tenants", json={"name": f"start-{secrets.token_hex(4)}"}, headers=admin)
        k = c.post(
            "/v1/api-keys", json={"tenant_id": t.json()["id"], "role": "service"}, headers=admin
        )
        return str(k.json()["secret"])


async def _database(name: str, create: bool) -> None:
    conn = await asyncpg.connect(PG)
    try:
        if create:
            await conn.execute(f'CREATE DATABASE "{name}"')
        else:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--burners", type=int, default=2, help="busy processes under load")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    name = f"loom_bench_start_{secrets.token_hex(4)}"
    asyncio.run(_database(name, True))
    env = _env(name)
    try:
        subprocess.run(
            [PY, "-m", "app.launcher.cli", "migrate"],
            env=env,
            cwd=SOURCE,
            check=True,
            capture_output=True,
        )
        result: dict[str, Any] = {"source": str(SOURCE), "label": args.label}
        result.update(import_cost(args.runs, env))
        result["ready_1_process_s"] = to_ready(env, args.runs, 1)
        result["ready_2_processes_s"] = to_ready(env, args.runs, 2)
        result["under_load"] = kills_under_load(env, args.kills, args.burners)
    finally:
        asyncio.run(_database(name, False))
    print(f"{'figure':44} value")
    print(f"{'import app.main (median)':44} {result['import_s']:.2f} s")
    print(f"{'RSS after import (median)':44} {result['import_rss_mib']:.0f} MiB")
    for key, label in (
        ("ready_1_process_s", "serve --workers 1 to /readyz, quiet"),
        ("ready_2_processes_s", "serve --workers 2 to /readyz, quiet"),
    ):
        v = result[key]
        print(f"{label:44} median {statistics.median(v):.2f} s, max {max(v):.2f} s")
    load = result["under_load"]
    r = load["restarts_s"]
    print(
        f"{'restart after kill -9, under load':44} median {statistics.median(r):.2f} s, "
        f"max {max(r):.2f} s ({len(r)} kills; {load['requests']})"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"startup{('-' + args.label) if args.label else ''}"
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The context build's tail at 32 clients, and the 1-client latency by process layout.

    .venv/bin/python -m bench.tail                    # 2 rounds, 6 s per measurement
    .venv/bin/python -m bench.tail --rounds 3 --seconds 10

Loads the `--quick` data set of `bench.run` into a fresh database, then:

* **tail**: starts API processes one after another, alternately with `LOOM_GC_TUNE=false`
  (CPython's collector defaults) and `true` (`app.core.heap`), each with
  `bench/gcprobe` on its PYTHONPATH (records every collection's generation and pause and
  how late a 1 ms timer on the event loop fires), and measures the context build of random
  50-message sessions at 32 clients (wrk) next to the read floor's;
* **1 client**: the context build's p50 at 1 client on the API that did the load, on a
  fresh 1-process API and on a fresh `--workers 2` API.

Prints a table and writes `bench/results/tail.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import wrk
from bench.run import ROOT, Bench, process_tree

PROBE = Path(__file__).with_name("gcprobe")
OUT = Path(__file__).with_name("results") / "tail.json"


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _probe(path: Path, pid: int) -> dict[str, Any]:
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return dict(json.loads(path.read_text()))


def _summary(probe: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"threshold": probe["threshold"], "frozen": probe["frozen"]}
    for gen in (0, 1, 2):
        pauses = [p for g, p in probe["pauses"] if g == gen]
        out[f"gen{gen}"] = {
            "count": len(pauses),
            "total_ms": round(1000 * sum(pauses), 1),
            "max_ms": round(1000 * max(pauses, default=0), 2),
        }
    lags = probe["lags"]
    out["loop_lag_ms"] = {
        "p50": round(1000 * _pct(lags, 0.5), 2),
        "p99": round(1000 * _pct(lags, 0.99), 2),
        "max": round(1000 * max(lags, default=0), 2),
    }
    return out


async def tail_trial(b: Bench, label: str, env: dict[str, str], seconds: int) -> dict[str, Any]:
    probe_file = b.logdir / f"probe-{label}.json"
    base_env = b.server_env
    extra = {
        **env,
        "LOOM_GC_PROBE": str(probe_file),
        "PYTHONPATH": os.pathsep.join([str(PROBE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    b.server_env = lambda: {**base_env(), **extra}  # type: ignore[method-assign]
    try:
        proc, port = b.start_api()
    finally:
        b.server_env = base_env  # type: ignore[method-assign]
    try:
        reqs = b.context_reqs(None)
        await b.measure(f"tail_{label}_warm", port, reqs, clients=32, seconds=2, warmup=False)
        _probe(probe_file, proc.pid)  # forget startup and warm-up
        m = await b.measure(f"tail_{label}", port, reqs, clients=32, seconds=seconds, warmup=False)
        probe = _summary(_probe(probe_file, proc.pid))
    finally:
        b.stop(proc)
    return {
        "label": label,
        "rps": round(m.rps, 1),
        "p50_ms": m.p50_ms,
        "p99_ms": m.p99_ms,
        "max_ms": m.max_ms,
        "errors": m.errors,
        **probe,
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its descendants so far (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


async def measured_cpu(
    b: Bench, name: str, pid: int, port: int, reqs: Any, seconds: int
) -> dict[str, Any]:
    """One 1-client measurement, with the API's CPU per request (robust to a busy machine,
    unlike its latency)."""
    await b.measure(f"{name}_warm", port, reqs, clients=1, seconds=2, warmup=False)
    before = cpu_seconds(pid)
    m = await b.measure(name, port, reqs, clients=1, seconds=seconds, warmup=False)
    used = cpu_seconds(pid) - before
    return {
        "p50_ms": m.p50_ms,
        "p99_ms": m.p99_ms,
        "requests": m.requests,
        "cpu_us_per_request": round(1e6 * used / max(1, m.requests), 1),
    }


def _start(b: Bench, env: dict[str, str], workers: int = 1) -> tuple[Any, int]:
    base_env = b.server_env
    b.server_env = lambda: {**base_env(), **env}  # type: ignore[method-assign]
    try:
        return b.start_api(workers=workers)
    finally:
        b.server_env = base_env  # type: ignore[method-assign]


async def one_client(b: Bench, seconds: int, rounds: int) -> list[dict[str, Any]]:
    """The context build's 1-client p50 on fresh APIs of 1 process and of 2 (`--workers`),
    with the collector's defaults and tuned, alternating, `rounds` times; and on the API
    that did the load."""
    reqs = b.context_reqs(None)
    rows = []
    m = await b.measure("one_loaded", b.api_port, reqs, clients=1, seconds=seconds)
    rows.append({"api": "1 process, did the load", "p50_ms": m.p50_ms, "p99_ms": m.p99_ms})
    for r in range(rounds):
        floor = await b.measure(
            f"floor_read_50_1c_{r}",
            b.floor_port,
            b.floor_read_reqs(None),
            clients=1,
            seconds=seconds,
        )
        rows.append({"api": "read floor", "p50_ms": floor.p50_ms, "p99_ms": floor.p99_ms})
        for tune in ("false", "true"):
            for workers in (1, 2):
                proc, port = _start(b, {"LOOM_GC_TUNE": tune}, workers)
                try:
                    row = await measured_cpu(
                        b, f"one_{workers}_{tune}_{r}", proc.pid, port, reqs, seconds
                    )
                finally:
                    b.stop(proc)
                rows.append({"api": f"fresh, --workers {workers}, LOOM_GC_TUNE={tune}", **row})
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--skip-one-client", action="store_true")
    parser.add_argument("--skip-tail", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    run_args = argparse.Namespace(
        quick=True,
        seconds=args.seconds,
        no_wrk=False,
        only="context",
        label="tail",
        no_latest=True,
        million=False,
    )
    b = Bench(run_args)
    b.db_url = await b.create_db()
    result: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": os.getloadavg(),
        "wrk": wrk.version(),
    }
    try:
        b.start_servers()
        import httpx

        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{b.api_port}", timeout=60
        ) as b.client:
            await b.load()
            trials = []
            for r in range(0 if args.skip_tail else args.rounds):
                floor = await b.measure(
                    f"floor_read_50_32c_{r}",
                    b.floor_port,
                    b.floor_read_reqs(None),
                    clients=32,
                    seconds=args.seconds,
                )
                trials.append(
                    {
                        "label": f"floor-{r}",
                        "rps": round(floor.rps, 1),
                        "p50_ms": floor.p50_ms,
                        "p99_ms": floor.p99_ms,
                        "max_ms": floor.max_ms,
                    }
                )
                for label, env in (
                    ("gc-defaults", {"LOOM_GC_TUNE": "false"}),
                    ("gc-tuned", {"LOOM_GC_TUNE": "true"}),
                ):
                    trials.append(await tail_trial(b, f"{label}-{r}", env, args.seconds))
            result["tail"] = trials
            if not args.skip_one_client:
                result["one_client"] = await one_client(b, args.seconds, args.rounds)
    finally:
        b.stop_servers()
        await b.drop_db()
    result["load_average_end"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"\n{'trial':<18} {'req/s':>7} {'p50':>7} {'p99':>8} {'max':>8}  "
        f"{'gen0 n/ms':>11} {'gen1 n/ms':>11} {'gen2 n/ms/max':>17} {'lag p99/max':>13}"
    )
    for t in result.get("tail", []):
        gc_cols = ""
        if "gen0" in t:
            g0, g1, g2, lag = t["gen0"], t["gen1"], t["gen2"], t["loop_lag_ms"]
            gc_cols = (
                f"  {g0['count']:>5}/{g0['total_ms']:<5.0f} {g1['count']:>5}/"
                f"{g1['total_ms']:<5.0f} {g2['count']:>5}/{g2['total_ms']:<5.0f}/"
                f"{g2['max_ms']:<5.0f} {lag['p99']:>6.1f}/{lag['max']:<6.1f}"
            )
        print(
            f"{t['label']:<18} {t['rps']:>7.0f} {t['p50_ms']:>7.2f} {t['p99_ms']:>8.2f} "
            f"{t['max_ms']:>8.1f}{gc_cols}"
        )
    for group in ("gc-defaults", "gc-tuned"):
        p99 = [t["p99_ms"] for t in result.get("tail", []) if t["label"].startswith(group)]
        if p99:
            print(f"{group}: p99 median {statistics.median(p99):.1f} ms over {len(p99)} runs")
    for row in result.get("one_client", []):
        cpu = (
            f"  CPU {row['cpu_us_per_request']:.0f} us/request"
            if "cpu_us_per_request" in row
            else ""
        )
        print(
            f"1 client: {row['api']:<46} p50 {row['p50_ms']:.2f} ms  p99 {row['p99_ms']:.2f}{cpu}"
        )
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())

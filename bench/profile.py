"""Where a hot path's CPU goes: py-spy samples one API process under wrk load.

    .venv/bin/python -m bench.profile                       # context and append, 32 clients
    .venv/bin/python -m bench.profile --only append --seconds 10 --top 40

Loads the `--quick` data set of `bench.run` (100 sessions x 50 messages) into a fresh
database, starts one API process, then for each operation runs wrk (32 clients) while
`py-spy record` samples the API process (idle frames excluded), and prints the top frames by
self time and by inclusive time, as a share of the samples. Collapsed stacks are kept in the
run's log directory (`<op>.folded`, for flame graphs). Needs `py-spy` (`pip install py-spy`)
and wrk; the figures themselves come from `bench.run`, not from here (py-spy slows the
process it samples).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import subprocess
import sys
from pathlib import Path

from bench import wrk
from bench.run import Bench

OPS = ("context", "append", "append20", "shared")


def py_spy() -> str:
    """py-spy on the PATH, else the one installed next to this interpreter (a venv)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or str(beside)


def frames(folded: Path) -> tuple[collections.Counter[str], collections.Counter[str], int]:
    """(self samples, inclusive samples, total) per `function (file)` from py-spy's raw
    (collapsed) output."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        names = [
            f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"
            if " (" in f
            else f
            for f in stack.split(";")
        ]
        own[names[-1]] += n
        for name in set(names):
            incl[name] += n
    return own, incl, total


def report(op: str, folded: Path, top: int) -> None:
    own, incl, total = frames(folded)
    if not total:
        print(f"\n{op}: no samples")
        return
    print(f"\n== {op}: {total} samples ==")
    print("  self  | function")
    for name, n in own.most_common(top):
        print(f"  {100 * n / total:5.1f}% | {name}")
    print(" incl.  | function")
    for name, n in incl.most_common(top):
        print(f"  {100 * n / total:5.1f}% | {name}")


async def profile(b: Bench, op: str, seconds: int, top: int, size: int | None) -> None:
    if op == "context":
        reqs = b.context_reqs(b.big.get(size) if size else None)
    elif op == "append":
        reqs = b.append_reqs("/v1/sessions", b.headers(), 1)
    elif op == "append20":
        reqs = b.append_reqs("/v1/sessions", b.headers(), 20)
    else:
        await b.api(
            "PUT",
            "/v1/shared-memory/global/bench-hot",
            b.key,
            {"value": {"hello": "world", "n": 42}},
        )
        reqs = [wrk.Req("GET", "/v1/shared-memory/global/bench-hot", b.headers(ctype=None))]
    clients = 1 if op == "shared" else 32
    await wrk.run(f"http://127.0.0.1:{b.api_port}", reqs, clients=clients, seconds=1)
    out = b.logdir / f"{op}.folded"
    spy = subprocess.Popen(  # noqa: ASYNC220 - runs beside wrk, waited for after it
        [
            py_spy(),
            "record",
            "--pid",
            str(b.api_proc_pid),
            "--duration",
            str(seconds),
            "--rate",
            "500",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    m = await wrk.run(f"http://127.0.0.1:{b.api_port}", reqs, clients=clients, seconds=seconds)
    spy.wait(timeout=seconds + 30)
    print(
        f"\n{op}: {m.rps:,.0f} req/s, p50 {m.p50_ms:.2f} ms at {clients} clients "
        f"(under py-spy), errors {m.errors}"
    )
    report(op, out, top)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", default="context,append", help=f"comma-separated operations: {','.join(OPS)}"
    )
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--full",
        action="store_true",
        help="load the full data set of bench.run (1,000 sessions and the "
        "10,000- and 100,000-message sessions) instead of --quick's",
    )
    parser.add_argument(
        "--session-size",
        type=int,
        choices=(50, 10_000, 100_000),
        help="context: build one long session's context instead of random 50-message sessions",
    )
    parser.add_argument(
        "--keep-db",
        action="store_true",
        help="keep the loaded database (its URL and key are printed)",
    )
    args = parser.parse_args()
    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        raise SystemExit("py-spy is not installed (pip install py-spy)")
    ops = [o.strip() for o in args.only.split(",") if o.strip()]
    run_args = argparse.Namespace(
        quick=not args.full,
        seconds=args.seconds,
        no_wrk=False,
        only="context",
        label="profile",
        no_latest=True,
        million=False,
    )
    b = Bench(run_args)
    b.db_url = await b.create_db()
    try:
        b.start_servers()
        b.api_proc_pid = b.api_proc.pid  # serve --workers 1 runs the API in-process
        import httpx

        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{b.api_port}", timeout=60
        ) as b.client:
            await b.load()
            for op in ops:
                await profile(b, op, args.seconds, args.top, args.session_size)
    finally:
        b.stop_servers()
        if args.keep_db:
            print(
                f"kept database: {b.db_url} (service key {b.key}, sessions {b.sessions[0]} ...)",
                file=sys.stderr,
            )
        else:
            await b.drop_db()
        print(f"folded stacks: {b.logdir}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())

"""`loom-memory eval locomo`: run the LoCoMo harness (`app.eval.locomo`) against a server
(`--url` and `--key`, or $LOOM_BASE_URL / $LOOM_API_KEY) or, when none is given, a fresh
server started for the run (`loom-memory serve` on a free port with its embedded stores in
a temporary directory, removed at the end).

An admin key gets a fresh tenant (and a service key in it) for the run; a service key
runs in its own tenant (new sessions, nothing else touched).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from app.eval import locomo, report
from app.eval.locomo_data import data_file, load_samples

DEFAULT_OUT = Path("locomo-results")
START_TIMEOUT = 180.0


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """`eval locomo` on the CLI's subcommands (the `locomo` parser returned)."""
    ev = sub.add_parser(
        "eval", help="measure how well a server remembers (eval locomo: the LoCoMo benchmark)"
    )
    kinds = ev.add_subparsers(dest="eval_kind", required=True)
    p = kinds.add_parser(
        "locomo",
        help="LoCoMo: search recall and evidence in the context at token budgets",
        description=__doc__,
    )
    p.add_argument("--data", required=True, help="LoCoMo JSON file (or its directory)")
    p.add_argument(
        "--url",
        default=os.environ.get("LOOM_BASE_URL"),
        help="server (default $LOOM_BASE_URL; none: start a fresh one)",
    )
    p.add_argument(
        "--key",
        default=os.environ.get("LOOM_API_KEY"),
        help="admin or service key (default $LOOM_API_KEY)",
    )
    p.add_argument("--samples", default="", help="comma-separated sample ids (default all)")
    p.add_argument("--conversations", type=int, metavar="N", help="only the first N conversations")
    p.add_argument(
        "--budgets",
        default=",".join(map(str, locomo.DEFAULT_BUDGETS)),
        help="comma-separated token budgets (default %(default)s)",
    )
    p.add_argument(
        "--questions", type=int, metavar="N", help="only the first N questions of each conversation"
    )
    p.add_argument(
        "--facts",
        action="store_true",
        help="facts on in the sessions (the server needs an LLM and a worker)",
    )
    p.add_argument(
        "--fast",
        action="store_true",
        help=f"one conversation, budgets {locomo.FAST_BUDGETS}, the first "
        f"{locomo.FAST_QUESTIONS} questions",
    )
    p.add_argument(
        "--recall",
        type=json.loads,
        metavar="JSON",
        help="recall settings for the builds besides the query, e.g. "
        '\'{"share": 0.1, "max_messages": 10}\' (default: the server\'s '
        "defaults)",
    )
    p.add_argument("--no-search", action="store_true", help="skip the search measure")
    p.add_argument("--no-context", action="store_true", help="skip the context measure")
    p.add_argument(
        "--settle",
        type=float,
        default=10.0,
        metavar="S",
        help="wait for background compression while it progresses, giving up "
        "after S idle seconds (default %(default)s)",
    )
    p.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help="directory for locomo.json, locomo.txt and locomo.png (default %(default)s)",
    )
    p.add_argument("--plot", help="where to write the plot (default <out>/locomo.png)")
    p.set_defaults(fn=cmd_eval)
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """The arguments of `eval locomo ...` alone (tests, scripts)."""
    parser = argparse.ArgumentParser(prog="loom-memory")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["eval", "locomo", *argv])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def fresh_server(log: Any) -> Iterator[tuple[str, str]]:
    """A `loom-memory serve` of its own (one API process and a worker, embedded PostgreSQL
    and Redis in a temporary directory): (its URL, its admin key)."""
    data = Path(tempfile.mkdtemp(prefix="loom-eval-"))
    port, key = _free_port(), "lm_eval_" + secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(LOOM_DATA_DIR=str(data), LOOM_ADMIN_KEY=key)
    url = f"http://127.0.0.1:{port}"
    out = (data / "serve.out").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.launcher.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        log(f"starting a fresh server on {url} (data in {data})")
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the server exited ({proc.returncode}); see {data / 'serve.out'}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start in {START_TIMEOUT:.0f} s")
            time.sleep(0.5)
        yield url, key
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()
        shutil.rmtree(data, ignore_errors=True)


async def _tenant_client(url: str, key: str, transport: Any = None) -> Any:
    """A client of a service key: a fresh tenant's when `key` is an admin's."""
    from loom_client import AsyncLoomClient

    async with AsyncLoomClient(url, key, transport=transport) as admin:
        me = await admin.me()
        if me.role != "admin":
            return AsyncLoomClient(url, key, timeout=120, transport=transport)
        tenant = await admin.create_tenant(
            f"locomo-eval-{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"
        )
        minted = await admin.create_api_key("service", tenant_id=tenant.id, name="locomo-eval")
    return AsyncLoomClient(url, minted.secret, timeout=120, transport=transport)


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        ["git", "--no-optional-locks", "rev-parse", "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    return r.stdout.strip()


def options_of(args: argparse.Namespace) -> locomo.Options:
    budgets = tuple(int(b) for b in args.budgets.split(",") if b.strip())
    if args.fast:
        budgets = locomo.FAST_BUDGETS
    if not budgets or min(budgets) < 256:
        raise ValueError("--budgets: at least one, each >= 256 tokens")
    return locomo.Options(
        budgets=budgets,
        questions=args.questions or (locomo.FAST_QUESTIONS if args.fast else None),
        facts=args.facts,
        settle_seconds=args.settle,
        search=not args.no_search,
        context=not args.no_context,
        recall=args.recall,
    )


async def evaluate(
    url: str, key: str, args: argparse.Namespace, log: Any = print, transport: Any = None
) -> dict[str, Any]:
    """Run the harness against a server (`transport`: any httpx transport, e.g. the app
    in-process); the result with its meta (not written)."""
    path = data_file(args.data)
    only = {s.strip() for s in args.samples.split(",") if s.strip()} or None
    samples = load_samples(path, only)
    if args.fast:
        samples = samples[:1]
    elif args.conversations:
        samples = samples[: args.conversations]
    options = options_of(args)
    t0 = time.perf_counter()
    async with await _tenant_client(url, key, transport) as loom:
        result = await locomo.run(loom, samples, options, log)
    result["meta"] = {
        "when": datetime.now(UTC).isoformat(),
        "git_commit": _git_commit(),
        "server": url,
        "data": str(path),
        "samples": [s.sample_id for s in samples],
        "turns": sum(len(s.turns) for s in samples),
        "questions": len(result["questions"]),
        "cpus": os.cpu_count(),
        "loadavg_end": os.getloadavg(),
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    return result


def write(result: dict[str, Any], out: Path, plot_path: Path | None = None) -> list[str]:
    """Write locomo.json and locomo.txt (and the plot) under `out`; notes to print."""
    out.mkdir(parents=True, exist_ok=True)
    text = report.table(result)
    (out / "locomo.json").write_text(json.dumps({**result, "table": text}, indent=1) + "\n")
    (out / "locomo.txt").write_text(text + "\n")
    notes = [f"wrote {out / 'locomo.json'} and {out / 'locomo.txt'}"]
    target = plot_path or out / "locomo.png"
    why = report.plot(result, target)
    notes.append(why or f"wrote {target}")
    return notes


def cmd_eval(args: argparse.Namespace) -> int:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        options_of(args)
        data_file(args.data)
    except (ValueError, FileNotFoundError) as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        import loom_client  # noqa: F401
    except ImportError:
        print("eval needs the Python client: pip install ./clients/python", file=sys.stderr)
        return 2
    if args.url and not args.key:
        print("--url needs --key (or $LOOM_API_KEY)", file=sys.stderr)
        return 2
    from loom_client.errors import LoomConnectionError, LoomError

    try:
        with contextlib.ExitStack() as stack:
            url, key = (args.url, args.key) if args.url else stack.enter_context(fresh_server(log))
            result = asyncio.run(evaluate(url, key, args, log))
    except LoomConnectionError as exc:  # "cannot connect to <url>: is the ... running?"
        print(f"eval failed: {exc.message}", file=sys.stderr)
        return 1
    except (httpx.HTTPError, LoomError, RuntimeError, ValueError) as exc:
        print(f"eval failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(report.table(result))
    for note in write(result, Path(args.out), Path(args.plot) if args.plot else None):
        log(note)
    return 0

"""Context builds with recall on a 10,000-message session, against a running server.

One session of 10,000 messages (bench/search_corpus.py, appended 500 at a time) with the
default config (recall adaptive), once the server's worker has compressed it; then 200
queries, each running in turn (so load spikes hit all alike):

* `build_recall`: POST /context with `recall.query` = the query (the adaptive default);
* `build_no_recall`: the same build with recall off (the build's own cost);
* `search`: POST /search, limit 20, no rerank (what the recall's search costs);
* `search_4k` / `build_recall_4k`: the same on a session of the same messages with a
  4,000-token budget.

    .venv/bin/python -m bench.recall_bench --url http://127.0.0.1:8420 --key ADMIN_OR_SERVICE
    .venv/bin/python -m bench.recall_bench          # a fresh server (app.eval.cli.fresh_server)

Latencies are the client's (HTTP and JSON included), one request at a time; on a shared
machine they move with the load (the load average is printed). Writes
bench/results/recall.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from app.eval.cli import _tenant_client, fresh_server
from app.eval.locomo import settle
from bench.run import RESULTS
from bench.search_corpus import conversation, queries

SIZE = 10_000


def summary(ms: list[float]) -> dict[str, float]:
    xs = sorted(ms)
    return {
        "p50_ms": round(statistics.median(xs), 2),
        "p95_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.95))], 2),
        "mean_ms": round(statistics.fmean(xs), 2),
        "n": len(xs),
    }


async def load(loom: Any, config: dict[str, Any], texts: list[str]) -> str:
    sid = (await loom.create_session(agent_id="recall-bench", config=config)).id
    for start in range(0, len(texts), 500):
        await loom.append_messages(
            sid,
            [
                {"role": "user" if (start + i) % 2 == 0 else "assistant", "content": t}
                for i, t in enumerate(texts[start : start + 500])
            ],
        )
    return sid


async def measure(url: str, key: str, n_queries: int) -> dict[str, Any]:
    texts = [t for _, t in conversation(SIZE, seed=7)]
    qs = queries(n_queries, seed=11)
    async with await _tenant_client(url, key) as loom:
        t0 = time.perf_counter()
        big = await load(loom, {}, texts)
        small = await load(loom, {"max_context_tokens": 4000, "reserved_output_tokens": 0}, texts)
        settled = [await settle(loom, s, 20.0) for s in (big, small)]
        load_s = time.perf_counter() - t0
        ops = {
            "build_recall": lambda q: loom.build_context(big, recall={"query": q}),
            "build_no_recall": lambda q: loom.build_context(big, recall={"enabled": False}),
            "search": lambda q: loom.search_session(big, q, limit=20, rerank=False),
            "build_recall_4k": lambda q: loom.build_context(small, recall={"query": q}),
        }
        for q in qs[:10]:  # warm-up
            for fn in ops.values():
                await fn(q)
        samples: dict[str, list[float]] = {k: [] for k in ops}
        recalled: list[int] = []
        for q in qs:
            for name, fn in ops.items():
                t = time.perf_counter()
                out = await fn(q)
                samples[name].append((time.perf_counter() - t) * 1000)
                if name == "build_recall":
                    recalled.append(len(out.recall.seqs) if out.recall else 0)
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "server": url,
        "session_messages": SIZE,
        "queries": n_queries,
        "settled": settled,
        "load_seconds": round(load_s, 1),
        "loadavg_after": os.getloadavg(),
        "recalled_messages_mean": round(statistics.fmean(recalled), 1),
        "results": {k: summary(v) for k, v in samples.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("LOOM_BASE_URL"))
    ap.add_argument("--key", default=os.environ.get("LOOM_API_KEY"))
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        url, key = (args.url, args.key) if args.url else stack.enter_context(fresh_server(print))
        res = asyncio.run(measure(url, key, args.queries))
    print(
        f"recall bench: {SIZE:,} messages, {res['queries']} queries, "
        f"load average {res['loadavg_after'][0]:.1f}; recalled "
        f"{res['recalled_messages_mean']} messages a build"
    )
    for name, r in res["results"].items():
        print(f"{name:18} p50 {r['p50_ms']:7.2f} ms   p95 {r['p95_ms']:7.2f} ms")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "recall.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Facts that stay true for years (issue 45): the long run in full, and the cost of
extraction at 2,000 stored facts.

1. `years`: two years of one life with one assistant (`tests.facts.years`: ~150
   sessions, 2,000+ facts, the imperfect scripted model: keys varied across aliases and
   subjects, malformed keys, stray fields, bad JSON; late old sessions, an imported one,
   deletions, a second user), through the real API in-process on real PostgreSQL, each
   session extracted in the request: its checks and cost.
2. `cost`: the 1,000-message conversation of bench/facts.py appended a turn at a time at
   three arrival rates (back to back, 1 s apart, 3 s apart), scheduled as the product
   does (`bench.facts_arrival`'s virtual clock, issue 37's trigger, the model answering
   in 0.5 s per call), into a scope already holding 2,000 facts (records, books read,
   relatives' homes that share the conversation's words): LLM calls and input tokens per
   1,000 messages (cl100k, what is sent), and the server time per batch (the wall time
   of `run_extraction`'s batch, the fake model answering at once) against the same run
   over 100 stored facts.

    .venv/bin/python -m bench.facts_years [--part years|cost|all] [--days 730]

Prints tables, writes bench/results/facts_years.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
from dataclasses import asdict
from typing import Any

import httpx

from app.core.db import transaction
from app.main import create_app
from bench.facts import (
    PG,
    RESULTS,
    arrive,
    conversation,
    facts_session,
    request_tokens,
    rules,
    seed_facts,
    settings_for,
)
from bench.tenants import fresh_tenant, scratch_database
from tests.facts.years import build, live, table
from tests.fakes.fact_model import FactModel
from tests.fakes.llm_server import FakeLLMServer

ARRIVALS = {"back to back": 0.05, "1 s apart": 1.0, "3 s apart": 3.0}
CALL_SECONDS = 0.5
# docs/facts.md before issue 45 (issue 37's trigger, a store of the conversation's own)
DOCUMENTED = {
    "back to back": {"llm_calls": 52, "input_tokens": 136_000},
    "1 s apart": {"llm_calls": 242, "input_tokens": 415_000},
    "3 s apart": {"llm_calls": 242, "input_tokens": 415_000},
}


async def years(days: int, fake: FakeLLMServer, db_url: str) -> dict[str, Any]:
    fake.reset()
    settings, admin_key = settings_for(db_url, fake)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        t = httpx.ASGITransport(app=app)
        _, key = await fresh_tenant(t, admin_key, "years")
        async with httpx.AsyncClient(
            transport=t,
            base_url="http://b",
            timeout=600,
            headers={"Authorization": f"Bearer {key}", "X-Agent-Id": "bench"},
        ) as c:
            report = await live(c, fake, build(days=days), "agent", "agent/bench")
    print(f"\n--- {days} days of one life (issue 45)\n" + table(report))
    if not report.ok():
        print("NOT OK:", report.two_current, report.false_current, report.lost)
        print(report.as_of_wrong[:10], report.context_names)
    small = [s for n, s in report.batch_seconds if n <= 300]
    large = [s for n, s in report.batch_seconds if n >= 1500]
    out = asdict(report)
    out["batch_seconds_median"] = {
        "stored <= 300": round(statistics.median(small), 3) if small else None,
        "stored >= 1500": round(statistics.median(large), 3) if large else None,
    }
    print(f"server time per session's extraction (median): {out['batch_seconds_median']}")
    return out


def store(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """`n` facts of a long-lived store: records, books read (one key), relatives' homes
    sharing the conversation's words."""
    out: list[tuple[str, str]] = []
    for i in range(n):
        k = i % 4
        if k == 0:
            out.append((f"The user owns vinyl record {i}.", f"user.vinyl.r{i}"))
        elif k == 1:
            out.append((f"The user has read book {i}.", "user.books_read"))
        elif k == 2:
            out.append((f"Cousin {i} of the user lives in town {i}.", f"user.cousin_{i}.home_city"))
        else:
            out.append(
                (f"The user visited town {i} {rng.choice(['once', 'twice'])}.", f"user.trip.t{i}")
            )
    return out


async def cost(
    gap: float, stored: int, n_messages: int, fake: FakeLLMServer, db_url: str
) -> dict[str, Any]:
    """`bench.facts_arrival.run` (issue 37's trigger) over a scope holding `stored` facts,
    with the server time of each batch."""
    n_topics = 25
    fake.reset()
    fake.respond_with_tools(FactModel(rules(n_topics)))
    settings, admin_key = settings_for(db_url, fake)
    batch_seconds: list[float] = []
    async with facts_session(settings, admin_key, "years-cost") as s:
        await seed_facts(
            s.state.db_connection,
            s.tenant,
            "agent/bench",
            store(stored, random.Random(3)),
            "2025-01-01T00:00:00Z",
        )
        async with transaction(s.state.db_connection) as conn:  # a store grown over years
            await conn.execute("ANALYZE memory_items")  # is analyzed
        msgs = conversation(n_messages, random.Random(7), n_topics)
        turns = [msgs[i : i + 2] for i in range(0, len(msgs), 2)]
        runs, _ = await arrive(
            s, turns, gap, fake, call_seconds=CALL_SECONDS, batch_seconds=batch_seconds
        )
        wm, _ = await s.marks()
    reqs = fake.requests_for("anthropic")
    tokens = [request_tokens(q.json) for q in reqs]
    per = 1000 / n_messages
    return {
        "stored": stored,
        "gap_seconds": gap,
        "runs": runs,
        "batches": len(batch_seconds),
        "messages_read": wm,
        "llm_calls": len(reqs),
        "input_tokens": sum(tokens),
        "largest_request_tokens": max(tokens, default=0),
        "per_1000_messages": {
            "llm_calls": round(len(reqs) * per, 1),
            "input_tokens": round(sum(tokens) * per),
        },
        "batch_seconds_median": round(statistics.median(batch_seconds), 3)
        if batch_seconds
        else None,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["years", "cost", "all"], default="all")
    parser.add_argument("--days", type=int, default=730)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--stored", type=int, default=2000)
    parser.add_argument(
        "--server-time-only", action="store_true", help="back to back only (2,000 and 100)"
    )
    args = parser.parse_args()
    out: dict[str, Any] = {}
    async with scratch_database(PG, "loom_bench_facts_years") as (db_url, fake):
        if args.part in ("cost", "all"):
            rows = []
            for label, gap in ARRIVALS.items():
                if args.server_time_only and label != "back to back":
                    continue
                row = await cost(gap, args.stored, args.messages, fake, db_url)
                rows.append({"arrival": label, **row})
            small = await cost(ARRIVALS["back to back"], 100, args.messages, fake, db_url)
            out["cost"] = {"rows": rows, "back_to_back_at_100": small, "documented": DOCUMENTED}
            print(f"\n--- cost per 1,000 messages at {args.stored} stored facts (issue 45)")
            print(
                "| arrival | LLM calls / 1,000 msgs | input tokens / 1,000 | documented | "
                "largest request | server s / batch |"
            )
            print("| --- | --- | --- | --- | --- | --- |")
            key = "cost_server_time" if args.server_time_only else "cost"
            if args.server_time_only:
                out[key] = out.pop("cost")
            for r in rows:
                p, d = r["per_1000_messages"], DOCUMENTED[r["arrival"]]
                print(
                    f"| {r['arrival']} | {p['llm_calls']} | {p['input_tokens']:,} | "
                    f"{d['llm_calls']} calls, {d['input_tokens']:,} | "
                    f"{r['largest_request_tokens']} | {r['batch_seconds_median']} |"
                )
            big_s, small_s = rows[0]["batch_seconds_median"], small["batch_seconds_median"]
            print(
                f"server time per batch, back to back: {big_s} s at {args.stored} stored "
                f"facts, {small_s} s at 100 ({(big_s or 0) / (small_s or 1):.2f}x)"
            )
        if args.part in ("years", "all"):
            out["years"] = await years(args.days, fake, db_url)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "facts_years.json"
    kept = json.loads(path.read_text()) if path.exists() else {}  # the other part's run
    path.write_text(json.dumps({**kept, **out}, indent=2, default=str) + "\n")


if __name__ == "__main__":
    asyncio.run(main())

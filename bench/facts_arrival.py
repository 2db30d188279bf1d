"""Fact extraction cost by how people type (issue 37, finding 8): LLM calls and input tokens
per 1,000 messages when turns arrive back to back, 1 s apart, and further apart than the
quiet time, under issue 27's trigger ("before") and issue 37's ("after"), against issue
19's trigger (after compressions; arrival does not change it: bench/facts_trigger.py).

The conversation of bench/facts.py (1,000 messages, a user turn and its answer at a time)
is appended through the real API, in-process, on real PostgreSQL; extraction is the real
code (`app.facts.extract.run_extraction`) with the scripted fake model. Time is virtual
(a run of months in seconds): turns arrive every `gap` seconds (0.05: back to back, an
append's round trip; 1; 90: past the 60 s quiet time); the model answers in 0.5 s per
call, so turns keep arriving while a run works. The scheduler is what the product does:

- at an append, unless a run is working (its end looks again), the session's run is set
  `due` seconds later (a debounce): before, `extraction_due` without the user count
  (6 waiting: at once; else the quiet time); after, with it (fewer than
  `LOOM_FACTS_QUIET_MIN_USER` user messages: the idle time);
- a run goes batch by batch (the bench drives `run_extraction`'s loop one batch a call)
  and turns that arrive during its calls are appended between batches; it reads what
  waited when it started; before, also whatever arrived while it worked; after, that
  only while 6 of it wait (`app.facts.extract.tail_due`);
- when a run ends, the same rule schedules the next one; after the last turn the
  conversation goes quiet and what waits is read (quiet or idle time later).

    .venv/bin/python -m bench.facts_arrival [--messages 1000]

Prints a table, writes bench/results/facts_arrival.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from typing import Any

from bench.facts import (
    PG,
    RESULTS,
    arrive,
    conversation,
    facts_session,
    request_tokens,
    rules,
    settings_for,
)
from bench.tenants import scratch_database
from tests.fakes.fact_model import FactModel
from tests.fakes.llm_server import FakeLLMServer

PATTERNS = {"back to back": 0.05, "1 s apart": 1.0, "past the quiet time": 90.0}
CALL_SECONDS = 0.5
OLD_TRIGGER = {"llm_calls": 166, "input_tokens": 289_739}  # bench/facts_trigger.py, before


async def run(
    policy: str, gap: float, n_messages: int, fake: FakeLLMServer, db_url: str
) -> dict[str, Any]:
    n_topics = 25
    fake.reset()
    fake.respond_with_tools(FactModel(rules(n_topics)))
    settings, admin_key = settings_for(db_url, fake)
    async with facts_session(settings, admin_key, "arrival") as s:
        msgs = conversation(n_messages, random.Random(7), n_topics)
        turns = [msgs[i : i + 2] for i in range(0, len(msgs), 2)]
        after = policy == "after"
        runs, now = await arrive(
            s, turns, gap, fake, users=after, tail=after, call_seconds=CALL_SECONDS
        )
        info = await s.facts()
    reqs = fake.requests_for("anthropic")
    in_tokens = sum(request_tokens(q.json) for q in reqs)
    per = 1000 / n_messages
    return {
        "policy": policy,
        "gap_seconds": gap,
        "runs": runs,
        "messages_read": info.watermark,
        "llm_calls": len(reqs),
        "extract_calls": sum(1 for q in reqs if q.tool_name == "record_facts"),
        "input_tokens": in_tokens,
        "virtual_seconds": round(now, 1),
        "per_1000_messages": {
            "llm_calls": round(len(reqs) * per, 1),
            "input_tokens": round(in_tokens * per),
        },
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    async with scratch_database(PG, "loom_bench_facts_arrival") as (db_url, fake):
        for label, gap in PATTERNS.items():
            for policy in ("before", "after"):
                row = await run(policy, gap, args.messages, fake, db_url)
                rows.append({"pattern": label, **row})
    print(
        "| arrival | trigger | runs | messages read | LLM calls / 1,000 msgs | input tokens / "
        "1,000 | calls vs issue 19's 166 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        p = r["per_1000_messages"]
        ratio = p["llm_calls"] / OLD_TRIGGER["llm_calls"]
        print(
            f"| {r['pattern']} | {r['policy']} | {r['runs']} | {r['messages_read']} | "
            f"{p['llm_calls']} | {p['input_tokens']:,} | {ratio:.2f}x |"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "facts_arrival.json").write_text(
        json.dumps({"old_trigger": OLD_TRIGGER, "rows": rows}, indent=2) + "\n"
    )


if __name__ == "__main__":
    asyncio.run(main())

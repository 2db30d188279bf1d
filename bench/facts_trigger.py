"""Fact extraction cost before and after the trigger change (issue 27): LLM calls and tokens
per 1,000 messages of a live conversation.

The conversation of bench/facts.py (1,000 messages, one user turn in five saying where one
of 25 friends moved) is appended one turn (2 messages) at a time to a session with the
default memory config, through the real API, in-process, on real PostgreSQL and Redis; the
model is the scripted fake of tests/fakes (its answers depend on the prompts it gets).
Extraction runs the real code (`app.facts.extract.run_extraction`) at the moments each
trigger fires:

- before (issue 19): after a compression (run in-process with heuristic summaries, as the
  job would, whenever one is due), over the messages that left L1, once at least
  `min_batch` (10) of them are new; messages still in L1 at the end are not read;
- after (issue 27): once `LOOM_FACTS_EVERY_MESSAGES` (6) messages wait, and when the
  conversation goes quiet at the end (the quiet time is not waited for: it adds no call).

Tokens are cl100k counts of what the SDK sent (system, prompt, tool schema) and of the
tool input it got back. Prints a table, writes bench/results/facts_trigger.json.

    .venv/bin/python -m bench.facts_trigger [--messages 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
from typing import Any

from app.core.tokens import count_text
from app.facts.extract import run_extraction
from app.memory.tasks import run_compression
from bench.facts import (
    PG,
    RESULTS,
    conversation,
    facts_session,
    request_tokens,
    rules,
    settings_for,
)
from bench.tenants import scratch_database
from tests.fakes.fact_model import FactModel
from tests.fakes.llm_server import FakeLLMServer

OLD_MIN_BATCH = 10
EVERY = 6


async def run(mode: str, n_messages: int, fake: FakeLLMServer, db_url: str) -> dict[str, Any]:
    n_topics = 25
    model = FactModel(rules(n_topics))
    fake.reset()
    fake.respond_with_tools(model)
    settings, admin_key = settings_for(db_url, fake, facts_every_messages=EVERY)
    runs = 0
    async with facts_session(settings, admin_key, "facts") as fs:
        compress_with = dataclasses.replace(fs.state, llm=None)  # heuristic summaries
        deps, tenant, session = fs.deps, fs.tenant, fs.session
        msgs = conversation(n_messages, random.Random(7), n_topics)
        for i in range(0, len(msgs), 2):
            await fs.append(msgs[i : i + 2])
            info = await fs.facts()
            if mode == "before":
                await run_compression(
                    compress_with, tenant, session, force=False, llm_fallback=True
                )
                info = await fs.facts()
                left = (info.l1_start_seq or 1) - 1
                if left - info.watermark >= OLD_MIN_BATCH:
                    await run_extraction(deps, tenant, session, upto=left)
                    runs += 1
            elif info.last_seq - info.watermark >= EVERY:
                await run_extraction(deps, tenant, session)
                runs += 1
        if mode == "after":  # the conversation goes quiet
            await run_extraction(deps, tenant, session)
            runs += 1
        info = await fs.facts()
        valid = (
            await fs.client.post(
                "/v1/memory-items/query", json={"filters": {"kind": "fact"}, "limit": 500}
            )
        ).json()["items"]
    reqs = fake.requests_for("anthropic")
    steps: dict[str, dict[str, int]] = {}
    for q in reqs:
        s = steps.setdefault(q.tool_name or "?", {"calls": 0, "input_tokens": 0})
        s["calls"] += 1
        s["input_tokens"] += request_tokens(q.json)
    output_tokens = sum(count_text(json.dumps(model(q))) for q in reqs)  # replayed answers
    in_tokens = sum(s["input_tokens"] for s in steps.values())
    per = 1000 / n_messages
    return {
        "mode": mode,
        "messages": n_messages,
        "runs": runs,
        "messages_read": info.watermark,
        "llm_calls": len(reqs),
        "input_tokens": in_tokens,
        "output_tokens": output_tokens,
        "per_1000_messages": {
            "llm_calls": round(len(reqs) * per, 1),
            "input_tokens": round(in_tokens * per),
            "output_tokens": round(output_tokens * per),
        },
        "steps": steps,
        "valid_facts": len(valid),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    async with scratch_database(PG, "loom_bench_facts_trigger") as (db_url, fake):
        for mode in ("before", "after"):
            rows.append(await run(mode, args.messages, fake, db_url))
    print(
        "| trigger | runs | messages read | LLM calls / 1,000 msgs | input tokens / 1,000 "
        "| output tokens / 1,000 | valid facts |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        p = r["per_1000_messages"]
        print(
            f"| {r['mode']} | {r['runs']} | {r['messages_read']} | {p['llm_calls']} | "
            f"{p['input_tokens']:,} | {p['output_tokens']:,} | {r['valid_facts']} |"
        )
    ratio = rows[1]["llm_calls"] / max(1, rows[0]["llm_calls"])
    print(f"\ncalls after / before: {ratio:.2f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "facts_trigger.json").write_text(
        json.dumps({"rows": rows, "calls_ratio": round(ratio, 2)}, indent=2) + "\n"
    )


if __name__ == "__main__":
    asyncio.run(main())

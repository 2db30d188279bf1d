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
import secrets
import uuid
from typing import Any

import httpx
from pydantic import SecretStr

from app.core.config import Settings
from app.core.tokens import count_text
from app.facts import state as facts_state
from app.facts.extract import Deps, run_extraction
from app.main import create_app
from app.memory.tasks import run_compression
from app.state import app_state
from bench.facts import PG, RESULTS, conversation, request_tokens, rules
from bench.tenants import fresh_tenant, scratch_database
from tests.fakes.fact_model import FactModel
from tests.fakes.llm_server import FakeLLMServer

OLD_MIN_BATCH = 10
EVERY = 6


async def run(mode: str, n_messages: int, fake: FakeLLMServer, db_url: str) -> dict[str, Any]:
    n_topics = 25
    model = FactModel(rules(n_topics))
    fake.reset()
    fake.respond_with_tools(model)
    admin_key = "lm_bench_" + secrets.token_urlsafe(16)
    settings = Settings(
        DATABASE_URL=db_url,
        REDIS_URL="redis://127.0.0.1:6379/0",
        LOOM_ADMIN_KEY=admin_key,
        LOOM_QUEUE_NAME=f"loom:bench:{uuid.uuid4().hex[:8]}",
    )
    settings = settings.model_copy(
        update={
            "llm_provider": "anthropic",
            "anthropic_api_key": SecretStr("sk-ant-bench-fake"),
            "anthropic_base_url": fake.base_url,
            "llm_max_retries": 0,
            "facts_every_messages": EVERY,
        }
    )
    app = create_app(settings)
    runs = 0
    async with app.router.lifespan_context(app):
        state = app_state(app)
        deps = Deps(state.sessionmaker, state.llm, settings)
        compress_with = dataclasses.replace(state, llm=None)  # heuristic summaries
        t = httpx.ASGITransport(app=app)
        tid, key = await fresh_tenant(t, admin_key, "facts")
        async with httpx.AsyncClient(
            transport=t,
            base_url="http://b",
            timeout=600,
            headers={"Authorization": f"Bearer {key}", "X-Agent-Id": "bench"},
        ) as c:
            sid = (
                await c.post("/v1/sessions", json={"config": {"facts": {"enabled": True}}})
            ).json()["id"]
            tenant, session = uuid.UUID(tid), uuid.UUID(sid)
            msgs = conversation(n_messages, random.Random(7), n_topics)
            for i in range(0, len(msgs), 2):
                r = await c.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs[i : i + 2]})
                assert r.status_code == 201, r.text
                async with state.sessionmaker() as db:
                    info = await facts_state.session_facts(db, tenant, session)
                    await db.rollback()
                assert info is not None
                if mode == "before":
                    await run_compression(
                        compress_with, tenant, session, force=False, llm_fallback=True
                    )
                    async with state.sessionmaker() as db:
                        info = await facts_state.session_facts(db, tenant, session)
                        await db.rollback()
                    assert info is not None
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
            async with state.sessionmaker() as db:
                info = await facts_state.session_facts(db, tenant, session)
                await db.rollback()
            assert info is not None
            valid = (
                await c.post(
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

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
import secrets
import uuid
from typing import Any

import httpx
from pydantic import SecretStr

from app.core.config import Settings
from app.facts import extract as facts_extract
from app.facts import state as facts_state
from app.facts.extract import Deps, run_extraction, tail_due
from app.facts.trigger import extraction_due
from app.main import create_app
from app.state import app_state
from bench.facts import PG, RESULTS, conversation, request_tokens, rules
from bench.tenants import fresh_tenant, scratch_database
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
    admin_key = "lm_bench_" + secrets.token_urlsafe(16)
    settings = Settings(
        DATABASE_URL=db_url,
        REDIS_URL="redis://127.0.0.1:6379/0",
        LOOM_ADMIN_KEY=SecretStr(admin_key),
        LOOM_QUEUE_NAME=f"loom:bench:{uuid.uuid4().hex[:8]}",
    ).model_copy(
        update={
            "llm_provider": "anthropic",
            "anthropic_api_key": SecretStr("sk-ant-bench-fake"),
            "anthropic_base_url": fake.base_url,
            "llm_max_retries": 0,
        }
    )
    every, quiet = settings.facts_every_messages, settings.facts_quiet_seconds
    facts_extract.MAX_BATCHES = 1  # the bench drives run_extraction's loop itself
    app = create_app(settings)
    runs = 0
    async with app.router.lifespan_context(app):
        state = app_state(app)
        deps = Deps(state.sessionmaker, state.llm, settings)
        t = httpx.ASGITransport(app=app)
        tid, key = await fresh_tenant(t, admin_key, "arrival")
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
            turns = [msgs[i : i + 2] for i in range(0, len(msgs), 2)]

            async def due_in() -> float | None:
                async with state.sessionmaker() as db:
                    info = await facts_state.session_facts(db, tenant, session)
                    wm, _, users = await facts_state.waiting_state(db, tenant, session)
                    await db.rollback()
                assert info is not None
                if policy == "before":
                    return extraction_due(info.last_seq - wm, every, quiet)
                return extraction_due(
                    info.last_seq - wm,
                    every,
                    quiet,
                    users_waiting=users,
                    quiet_min_user=settings.facts_quiet_min_user,
                    idle_seconds=settings.facts_idle_seconds,
                )

            async def append(i: int) -> None:
                r = await c.post(f"/v1/sessions/{sid}/messages", json={"messages": turns[i]})
                assert r.status_code == 201, r.text

            async def last_seq() -> int:
                async with state.sessionmaker() as db:
                    info = await facts_state.session_facts(db, tenant, session)
                    await db.rollback()
                assert info is not None
                return info.last_seq

            async def watermark() -> int:
                async with state.sessionmaker() as db:
                    wm = await facts_state.watermark(db, tenant, session)
                    await db.rollback()
                return wm

            now, nxt = 0.0, 0
            job_at: float | None = None
            busy_until: float | None = None  # a run works until then; its end looks again
            while nxt < len(turns) or job_at is not None or busy_until is not None:
                events = [
                    (nxt * gap, "turn") if nxt < len(turns) else None,
                    (job_at, "job") if job_at is not None and busy_until is None else None,
                    (busy_until, "end") if busy_until is not None else None,
                ]
                when, what = min(e for e in events if e is not None)
                now = when
                if what == "turn":
                    await append(nxt)
                    nxt += 1
                    if busy_until is None:
                        d = await due_in()
                        job_at = None if d is None else now + d
                elif what == "job":
                    # the run, batch by batch (as run_extraction's loop), turns arriving
                    # while its calls take their time
                    runs += 1
                    began = await last_seq()
                    clock = now
                    while True:
                        wm, last = await watermark(), await last_seq()
                        if last <= wm:
                            break
                        if policy == "after" and not tail_due(wm, began, last, every):
                            break
                        before = len(fake.requests_for("anthropic"))
                        await run_extraction(deps, tenant, session)  # one batch
                        calls = len(fake.requests_for("anthropic")) - before
                        clock += 0.01 + CALL_SECONDS * calls
                        while nxt < len(turns) and nxt * gap <= clock:
                            await append(nxt)
                            nxt += 1
                    job_at, busy_until = None, clock
                else:
                    busy_until = None
                    d = await due_in()
                    job_at = None if d is None else now + d
            async with state.sessionmaker() as db:
                info = await facts_state.session_facts(db, tenant, session)
                await db.rollback()
            assert info is not None
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

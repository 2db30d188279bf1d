"""Fact extraction cost: LLM calls and tokens per 1,000 messages (issue 19).

One session of 1,000 messages (500 user turns, one in five stating a fact, some of them
changing an earlier one) is extracted through the real API (`POST .../memory/extract?
wait=true`, in-process, real PostgreSQL and Redis) with the model played by the fake
Anthropic server (tests/fakes), which answers both structured steps by rule. Tokens are
counted with cl100k on what the SDK sent (system, prompt and tool schema) and on the tool
input it got back, so the figures are those a real model would bill, give or take its
tokenizer. Run for the default input cap (LOOM_FACTS_INPUT_TOKENS=8000) and a small one.
Prints a table and writes bench/results/facts.json.

    .venv/bin/python -m bench.facts [--messages 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from app.core.config import Settings
from app.core.db import Connect, transaction
from app.core.tokens import count_text
from app.facts import extract as facts_extract
from app.facts import state as facts_state
from app.facts.extract import Deps, run_extraction, tail_due
from app.facts.trigger import extraction_due
from app.knowledge import repository as knowledge_repository
from app.knowledge.scopes import parse_scope
from app.knowledge.service import token_cost
from app.main import create_app
from app.models.memory_item import MemoryItemRow
from app.state import AppState, app_state
from bench.tenants import fresh_tenant, scratch_database
from tests.facts.support import FactModel, Rule
from tests.fakes.llm_server import FakeLLMServer

PG = "postgresql://postgres@127.0.0.1:5432"
RESULTS = Path(__file__).parent / "results"
CITIES = "Lisbon Porto Madrid Paris Berlin Rome Oslo Vienna Prague Dublin".split()
CHATTER = [
    "Can you summarise the report?",
    "What is the weather like?",
    "Thanks, that helps.",
    "Please draft a reply to the team.",
    "How long will the migration take?",
    "Let's continue tomorrow.",
]


def rules(n_topics: int) -> list[Rule]:
    out = []
    for t in range(n_topics):
        for city in CITIES:
            out.append(
                Rule(
                    f"friend {t} moved to {city}",
                    f"Friend {t} of the user lives in {city}.",
                    f"friend{t}",
                )
            )
    return out


def conversation(n: int, rng: random.Random, n_topics: int) -> list[dict[str, Any]]:
    msgs = []
    for i in range(n // 2):
        if rng.random() < 0.2:
            text = (
                f"By the way, my friend {rng.randrange(n_topics)} moved to "
                f"{rng.choice(CITIES)} recently."
            )
        else:
            text = rng.choice(CHATTER) + " " + " ".join(rng.choice(CHATTER) for _ in range(3))
        minute = i % 60
        msgs.append(
            {
                "role": "user",
                "content": text,
                "created_at": f"2026-03-{1 + i // 60 % 28:02d}T10:{minute:02d}:00Z",
            }
        )
        msgs.append(
            {
                "role": "assistant",
                "content": "Understood. " + rng.choice(CHATTER),
                "created_at": f"2026-03-{1 + i // 60 % 28:02d}T10:{minute:02d}:30Z",
            }
        )
    return msgs


def request_tokens(body: dict[str, Any]) -> int:
    """cl100k tokens of what the model reads: system, messages, tool definitions."""
    parts = [str(body.get("system", ""))]
    parts += [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body.get("messages", [])
    ]
    parts += [json.dumps(t) for t in body.get("tools", [])]
    return sum(count_text(p) for p in parts)


async def run(n_messages: int, cap: int, fake: FakeLLMServer, db_url: str) -> dict[str, Any]:
    n_topics = 25
    model = FactModel(rules(n_topics))
    fake.reset()
    fake.respond_with_tools(model)
    settings, admin_key = settings_for(
        db_url, fake, facts_input_tokens=cap, facts_wait_seconds=600.0
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        t = httpx.ASGITransport(app=app)
        tid, key = await fresh_tenant(t, admin_key, "facts")
        async with httpx.AsyncClient(
            transport=t,
            base_url="http://b",
            timeout=600,
            headers={"Authorization": f"Bearer {key}", "X-Agent-Id": "bench"},
        ) as c:
            sid = (
                await c.post(
                    "/v1/sessions",
                    json={"config": {"l1_max_messages": 1000, "facts": {"enabled": True}}},
                )
            ).json()["id"]
            msgs = conversation(n_messages, random.Random(7), n_topics)
            for i in range(0, len(msgs), 200):
                r = await c.post(
                    f"/v1/sessions/{sid}/messages", json={"messages": msgs[i : i + 200]}
                )
                assert r.status_code == 201, r.text
            started = time.perf_counter()
            r = await c.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true"})
            took = time.perf_counter() - started
            assert r.status_code == 200, r.text
            result = r.json()["result"]
            valid = (
                await c.post(
                    "/v1/memory-items/query", json={"filters": {"kind": "fact"}, "limit": 500}
                )
            ).json()["items"]
    reqs = fake.requests_for("anthropic")
    steps: dict[str, dict[str, int]] = {}
    for q in reqs:
        step = q.tool_name or "?"
        s = steps.setdefault(step, {"calls": 0, "input_tokens": 0})
        s["calls"] += 1
        s["input_tokens"] += request_tokens(q.json)
    output_tokens = sum(count_text(json.dumps(model(q))) for q in reqs)  # replayed answers
    calls = len(reqs)
    in_tokens = sum(s["input_tokens"] for s in steps.values())
    per = 1000 / n_messages
    return {
        "messages": n_messages,
        "input_cap_tokens": cap,
        "batches": result["batches"],
        "llm_calls": calls,
        "input_tokens": in_tokens,
        "output_tokens": output_tokens,
        "per_1000_messages": {
            "llm_calls": round(calls * per, 1),
            "input_tokens": round(in_tokens * per),
            "output_tokens": round(output_tokens * per),
        },
        "steps": steps,
        "added": result["added"],
        "invalidated": result["invalidated"],
        "updated": result["updated"],
        "unchanged": result["unchanged"],
        "valid_facts": len(valid),
        "seconds_with_fake_llm": round(took, 2),
    }


# --- what bench/facts_trigger.py, facts_arrival.py and facts_years.py share ------------------


def settings_for(db_url: str, fake: FakeLLMServer, **update: Any) -> tuple[Settings, str]:
    """The app's settings on `db_url` with the fake model (and `update`), and its admin key."""
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
            **update,
        }
    )
    return settings, admin_key


@dataclass(frozen=True)
class FactsSession:
    """A started app, a tenant's client on it and its session with facts enabled."""

    state: AppState
    deps: Deps  # run_extraction's, on the app's pool
    client: httpx.AsyncClient
    tenant: uuid.UUID
    session: uuid.UUID

    async def append(self, messages: list[dict[str, Any]]) -> None:
        r = await self.client.post(
            f"/v1/sessions/{self.session}/messages", json={"messages": messages}
        )
        assert r.status_code == 201, r.text

    async def facts(self) -> facts_state.SessionFacts:
        """The session's extraction state (a read on a connection of its own)."""
        async with self.state.db_connection() as conn:
            info = await facts_state.session_facts(conn, self.tenant, self.session)
        assert info is not None
        return info

    async def marks(self) -> tuple[int, int]:
        """(the extraction's watermark, the session's last seq)."""
        info = await self.facts()
        return info.watermark, info.last_seq

    async def due_in(self, *, users: bool = True) -> float | None:
        """Seconds until the trigger runs the extraction (`extraction_due`), None when
        nothing waits; `users=False`: without the user count (issue 27's trigger)."""
        settings = self.state.settings
        every, quiet = settings.facts_every_messages, settings.facts_quiet_seconds
        async with self.state.db_connection() as conn:
            info = await facts_state.session_facts(conn, self.tenant, self.session)
            wm, _, waiting_users = await facts_state.waiting_state(conn, self.tenant, self.session)
        assert info is not None
        if not users:
            return extraction_due(info.last_seq - wm, every, quiet)
        return extraction_due(
            info.last_seq - wm,
            every,
            quiet,
            users_waiting=waiting_users,
            quiet_min_user=settings.facts_quiet_min_user,
            idle_seconds=settings.facts_idle_seconds,
        )


@asynccontextmanager
async def facts_session(
    settings: Settings, admin_key: str, prefix: str
) -> AsyncIterator[FactsSession]:
    """The app of `settings` started, a fresh tenant (`prefix`) and a session with facts."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        state = app_state(app)
        t = httpx.ASGITransport(app=app)
        tid, key = await fresh_tenant(t, admin_key, prefix)
        async with httpx.AsyncClient(
            transport=t,
            base_url="http://b",
            timeout=600,
            headers={"Authorization": f"Bearer {key}", "X-Agent-Id": "bench"},
        ) as c:
            r = await c.post("/v1/sessions", json={"config": {"facts": {"enabled": True}}})
            assert r.status_code == 201, r.text
            yield FactsSession(
                state,
                Deps(state.db_connection, state.llm, settings),
                c,
                uuid.UUID(tid),
                uuid.UUID(r.json()["id"]),
            )


async def arrive(
    s: FactsSession,
    turns: list[list[dict[str, Any]]],
    gap: float,
    fake: FakeLLMServer,
    *,
    users: bool = True,
    tail: bool = True,
    call_seconds: float = 0.5,
    batch_seconds: list[float] | None = None,
) -> tuple[int, float]:
    """Append `turns` every `gap` virtual seconds and run the extraction as the product
    schedules it (see bench/facts_arrival.py): (runs, the virtual seconds it took).
    `users`: the trigger counts user messages (issue 37); `tail`: a run reads what arrives
    while it works only while `every` of it wait (`tail_due`); `batch_seconds` gets each
    batch's wall time."""
    every = s.state.settings.facts_every_messages
    facts_extract.MAX_BATCHES = 1  # this drives run_extraction's loop itself
    now, nxt, runs = 0.0, 0, 0
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
            await s.append(turns[nxt])
            nxt += 1
            if busy_until is None:
                d = await s.due_in(users=users)
                job_at = None if d is None else now + d
        elif what == "job":
            # the run, batch by batch (as run_extraction's loop), turns arriving while its
            # calls take their time
            runs += 1
            began = (await s.marks())[1]
            clock = now
            while True:
                wm, last = await s.marks()
                if last <= wm or (tail and not tail_due(wm, began, last, every)):
                    break
                before = len(fake.requests_for("anthropic"))
                t0 = time.perf_counter()
                await run_extraction(s.deps, s.tenant, s.session)  # one batch
                if batch_seconds is not None:
                    batch_seconds.append(time.perf_counter() - t0)
                calls = len(fake.requests_for("anthropic")) - before
                clock += 0.01 + call_seconds * calls
                while nxt < len(turns) and nxt * gap <= clock:
                    await s.append(turns[nxt])
                    nxt += 1
            job_at, busy_until = None, clock
        else:
            busy_until = None
            d = await s.due_in(users=users)
            job_at = None if d is None else now + d
    return runs, now


async def seed_facts(
    connect: Connect,
    tenant_id: uuid.UUID,
    scope: str,
    facts: list[tuple[str, str]],
    valid_from: str,
    importance: float = 0.5,
) -> None:
    """Store many facts at once behind the API (text, key), valid from `valid_from`, in
    one transaction: rows as the API writes them (tests.facts.helpers.seed_facts's)."""
    kind, _, sid = scope.partition("/")
    storage = parse_scope(scope).storage_id if kind != "agent" else sid
    at = datetime.fromisoformat(valid_from.replace("Z", "+00:00"))
    async with transaction(connect) as conn:
        for text, key in facts:
            await knowledge_repository.add(
                conn,
                MemoryItemRow(
                    id=uuid.uuid4(),
                    tenant_id=tenant_id,
                    scope_kind=kind,
                    scope_id=storage,
                    kind="fact",
                    source="api",
                    tags=[],
                    importance=importance,
                    text=text,
                    payload=None,
                    token_cost=token_cost("fact", text, None),
                    created_at=at,
                    updated_at=at,
                    valid_from=at,
                    invalid_at=None,
                    superseded_by=None,
                    source_session_id=None,
                    source_seqs=[],
                    version=1,
                    fact_key=key,
                    stated_at=at,
                    sources=[],
                ),
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    async with scratch_database(PG, "loom_bench_facts") as (db_url, fake):
        for cap in (8000, 2000):
            rows.append(await run(args.messages, cap, fake, db_url))
    print(f"\nfact extraction, {args.messages} messages (fake model, cl100k token counts)")
    print(
        f"{'input cap':>9} {'batches':>7} {'calls':>6} {'in tok':>8} {'out tok':>8} "
        f"{'calls/1k':>8} {'in/1k':>8} {'out/1k':>8} {'facts':>5} {'add/inv/none':>12}"
    )
    for r in rows:
        p = r["per_1000_messages"]
        print(
            f"{r['input_cap_tokens']:>9} {r['batches']:>7} {r['llm_calls']:>6} "
            f"{r['input_tokens']:>8} {r['output_tokens']:>8} {p['llm_calls']:>8} "
            f"{p['input_tokens']:>8} {p['output_tokens']:>8} {r['valid_facts']:>5} "
            f"{r['added']:>4}/{r['invalidated']}/{r['unchanged']}"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "facts.json").write_text(json.dumps({"facts": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS / 'facts.json'}")


if __name__ == "__main__":
    asyncio.run(main())

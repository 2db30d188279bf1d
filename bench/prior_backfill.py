"""What the informativeness prior costs (issue 48): the migration's backfill per million
messages, and the append path's share of it.

* backfill: a fresh database migrated to 0019, `--messages` messages (sessions of
  `--per-session`, bench conversation text, vectors as an append writes them) written
  straight into `messages`, VACUUM (ANALYZE); then `0020_message_prior` runs (its two
  columns added, every message's prior computed in Python and written back in keyset
  batches); its time, and the time per million messages (linear in the messages: one
  pass over the primary key).
* append: the Python part an append adds per message (`app.messages.prior.priors`,
  what `app.messages.repository.append_rows` computes for its batch), in microseconds,
  for batches of 1 and 20 (the SQL part, the first row's look at the session's last
  message, is one primary-key lookup in the append statement; `bench.run --only append`
  measures the whole append).

    .venv/bin/python -m bench.prior_backfill                  # 200,000 messages
    .venv/bin/python -m bench.prior_backfill --messages 50000

Prints the figures and writes bench/results/prior_backfill.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
from alembic import command

from app.launcher.migrate import alembic_config
from app.messages import prior as turn_prior
from bench import search_corpus

PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

_INSERT = """
INSERT INTO messages (session_id, seq, tenant_id, role, content, is_error, text, token_count,
                      metadata, created_at, search_vector)
SELECT session_id, seq, $1, role, to_jsonb(text), false, text, 12, '{}'::jsonb, now(),
       to_tsvector('english'::regconfig, text)
FROM bench_stage
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def texts(rng: random.Random, n: int) -> list[tuple[str, str]]:
    out = []
    for seq in range(1, n + 1):
        role = "user" if seq % 2 else "assistant"
        out.append((role, search_corpus.message_text(rng, role)))
    return out


def append_cost(rng: random.Random) -> dict[str, float]:
    """Microseconds the append's Python part takes per message, batches of 1 and 20."""
    rows = texts(rng, 4000)
    out: dict[str, float] = {}
    for batch in (1, 20):
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            for i in range(0, len(rows), batch):
                part = rows[i : i + batch]
                turn_prior.as_answer(turn_prior.priors(part)[0][0])
            runs.append((time.perf_counter() - t0) / len(rows) * 1e6)
        out[f"batch_{batch}_us_per_message"] = round(statistics.median(runs), 1)
    return out


async def load(url: str, total: int, per: int, rng: random.Random) -> None:
    conn = await asyncpg.connect(url)
    tenant = uuid.uuid4()
    await conn.execute(
        "INSERT INTO tenants (id, tenant_id, name) VALUES ($1, $1, $2)", tenant, "backfill"
    )
    await conn.execute(
        "CREATE TEMP TABLE bench_stage (session_id uuid, seq bigint, role text, text text)"
    )
    left = total
    while left > 0:
        records = []
        for _ in range(20):
            if left <= 0:
                break
            sid = uuid.uuid4()
            n = min(per, left)
            await conn.execute(
                "INSERT INTO sessions (id, tenant_id, agent_id, last_seq) VALUES ($1, $2, 'a', $3)",
                sid,
                tenant,
                n,
            )
            records += [(sid, i + 1, r, t) for i, (r, t) in enumerate(texts(rng, n))]
            left -= n
        async with conn.transaction():
            await conn.copy_records_to_table("bench_stage", records=records)
            await conn.execute(_INSERT, tenant)
            await conn.execute("TRUNCATE bench_stage")
        log(f"loaded {total - left:,}/{total:,}")
    await conn.execute("VACUUM (ANALYZE) messages")
    await conn.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--per-session", type=int, default=1000)
    args = ap.parse_args()
    rng = random.Random(48)
    results: dict[str, Any] = {"append": append_cost(rng)}
    log(f"append's Python part: {results['append']}")
    db = f"loom_bench_prior_{secrets.token_hex(3)}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f'CREATE DATABASE "{db}"')
    await admin.close()
    url = PG.rsplit("/", 1)[0] + "/" + db
    cfg = alembic_config(url.replace("postgresql://", "postgresql+asyncpg://"))
    try:
        await asyncio.to_thread(command.upgrade, cfg, "0019_facts_months")
        t0 = time.perf_counter()
        await load(url, args.messages, args.per_session, rng)
        log(f"loaded in {time.perf_counter() - t0:.1f} s; running 0020_message_prior")
        t0 = time.perf_counter()
        await asyncio.to_thread(command.upgrade, cfg, "0020_message_prior")
        seconds = time.perf_counter() - t0
        conn = await asyncpg.connect(url)
        done = await conn.fetchval("SELECT count(*) FROM messages WHERE prior <> 0")
        await conn.close()
        results["backfill"] = {
            "messages": args.messages,
            "written": done,
            "seconds": round(seconds, 1),
            "seconds_per_million": round(seconds * 1_000_000 / args.messages, 0),
            "messages_per_second": round(args.messages / seconds, 0),
        }
        log(f"backfill: {results['backfill']}")
    finally:
        admin = await asyncpg.connect(PG)
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()
    results["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "prior_backfill.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())

"""Retrieval quality on LoCoMo (development half): evidence recall@5/@10/@20 of session search.

Ingests each LoCoMo sample as one session through the HTTP API (one message per turn, in
order), asks every question with at least one existing evidence turn as a session search,
and scores the fraction of the question's evidence turns among the top k results (the
measure is defined in the data's README.md; bench/README.md "Retrieval (LoCoMo)").

    .venv/bin/python -m bench.retrieval                  # all samples of the dev half
    .venv/bin/python -m bench.retrieval --dates          # + created_at from the sessions' dates
    .venv/bin/python -m bench.retrieval --samples conv-26,conv-30 --label "try"
    .venv/bin/python -m bench.retrieval --extra-body '{"some_option": true}'

Starts the API like bench/run.py (fresh database `loom_bench_<hex>` on the machine's
PostgreSQL, dropped at the end unless --keep-db; no worker, no LLM), prints a table and
writes bench/results/retrieval-<UTC stamp>.json and bench/results/retrieval-latest.json.
The data (CC BY-NC 4.0) is read from ../shared/data/locomo-dev (relative to the repo root)
and never copied into the repo; the result files hold the questions, so they are
git-ignored (bench/results/.gitignore).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from app.eval.locomo_data import Question, Sample, load_samples
from app.eval.locomo_data import data_file as find_data
from bench.run import PG, RESULTS, ROOT, Bench

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev"
KS = (5, 10, 20)
SEARCH_LIMIT = 20  # the API's maximum (app/search/schemas.py MAX_LIMIT)
BATCH = 100  # messages per append request
AGENT = "locomo"
# Large window and L1 so compression never matters here (search reads the full history
# anyway; compression jobs that might be queued are never run: there is no worker).
SESSION_CONFIG = {"max_context_tokens": 1_000_000, "l1_max_messages": 1000}


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    v = sorted(values)
    pos = (len(v) - 1) * p / 100
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def recall(top: list[str], evidence: list[str], k: int) -> float:
    return len(set(top[:k]) & set(evidence)) / len(evidence)


class Retrieval(Bench):
    """Uses bench.run.Bench's database and server helpers (create_db, drop_db, server_env,
    log_to, start_api, stop_servers, log); none of its load or measurement state."""

    def __init__(self, args: argparse.Namespace) -> None:  # noqa: D107 - no Bench.__init__
        self.args = args
        self.db = f"loom_bench_{secrets.token_hex(3)}"
        self.admin_key = "lm_bench_" + secrets.token_urlsafe(24)
        self.queue_name = f"bench:{self.db}"
        self.procs: list[subprocess.Popen] = []
        self.logdir = Path(tempfile.mkdtemp(prefix=f"{self.db}-logs-"))
        self.t_start = time.time()
        self.load_start = os.getloadavg()
        self.db_url = ""
        self.key = ""
        self.tenant_id = ""
        self.ingest_seconds = 0.0
        self.search_seconds = 0.0
        self.extra = json.loads(args.extra_body) if args.extra_body else {}
        if not isinstance(self.extra, dict):
            raise SystemExit("--extra-body must be a JSON object")

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}", "X-Agent-Id": AGENT}

    async def setup_tenant(self, client: httpx.AsyncClient) -> None:
        admin = {"Authorization": f"Bearer {self.admin_key}"}
        r = await client.post("/v1/tenants", json={"name": "locomo"}, headers=admin)
        r.raise_for_status()
        self.tenant_id = r.json()["id"]
        r = await client.post(
            "/v1/api-keys", json={"tenant_id": self.tenant_id, "role": "service"}, headers=admin
        )
        r.raise_for_status()
        self.key = r.json()["secret"]

    async def ingest(self, client: httpx.AsyncClient, sample: Sample) -> None:
        r = await client.post(
            "/v1/sessions",
            headers=self.auth(),
            json={
                "agent_id": AGENT,
                "config": SESSION_CONFIG,
                "metadata": {"locomo_sample": sample.sample_id},
            },
        )
        if r.status_code >= 300:
            raise RuntimeError(f"create session: {r.status_code} {r.text[:500]}")
        sample.session_id = r.json()["id"]
        seq = 0
        for start in range(0, len(sample.turns), BATCH):
            batch = sample.turns[start : start + BATCH]
            msgs = []
            for t in batch:
                m: dict[str, Any] = {"role": t.role, "content": t.text}
                if self.args.dates and t.created_at:  # never sent without --dates
                    m["created_at"] = t.created_at.isoformat()
                msgs.append(m)
            r = await client.post(
                f"/v1/sessions/{sample.session_id}/messages",
                headers=self.auth(),
                json={"messages": msgs},
            )
            if r.status_code >= 300:
                raise RuntimeError(f"append to {sample.sample_id}: {r.status_code} {r.text[:500]}")
            body = r.json()
            got = [m["seq"] for m in body["messages"]]
            want = list(range(seq + 1, seq + 1 + len(batch)))
            if got != want:
                raise RuntimeError(f"{sample.sample_id}: seqs {got[:3]}... are not {want[:3]}...")
            for s, t in zip(got, batch, strict=True):
                sample.seq_to_dia[s] = t.dia_id
            seq = body["last_seq"]

    async def search_all(
        self, client: httpx.AsyncClient, samples: list[Sample]
    ) -> list[dict[str, Any]]:
        sem = asyncio.Semaphore(self.args.concurrency)
        jobs = [(s, q) for s in samples for q in s.questions]
        done = 0

        async def one(sample: Sample, q: Question) -> dict[str, Any]:
            nonlocal done
            body = {"query": q.question, "limit": SEARCH_LIMIT, "rerank": False} | self.extra
            async with sem:
                t0 = time.perf_counter()
                r = await client.post(
                    f"/v1/sessions/{sample.session_id}/search", headers=self.auth(), json=body
                )
                ms = (time.perf_counter() - t0) * 1000
            if r.status_code != 200:
                raise RuntimeError(
                    f"search {sample.sample_id} #{q.index}: {r.status_code} {r.text[:500]}"
                )
            top = [sample.seq_to_dia.get(h["seq"], f"seq{h['seq']}") for h in r.json()["results"]]
            done += 1
            if done % 200 == 0:
                self.log(f"searched {done}/{len(jobs)}")
            ranks = {d: (top.index(d) + 1 if d in top else None) for d in q.evidence}
            return {
                "sample_id": sample.sample_id,
                "qa_index": q.index,
                "question": q.question,
                "category": q.category,
                "evidence": q.evidence,
                "evidence_missing": q.missing,
                "top10": top[:10],
                "evidence_ranks": ranks,
                **{f"r@{k}": recall(top, q.evidence, k) for k in KS},
                "latency_ms": round(ms, 2),
            }

        # one warm-up search per session (not counted): first-search statistics fold and
        # cold caches would otherwise land in the latency figures
        for s in samples:
            if s.questions:
                await client.post(
                    f"/v1/sessions/{s.session_id}/search",
                    headers=self.auth(),
                    json={"query": s.questions[0].question, "limit": SEARCH_LIMIT, "rerank": False}
                    | self.extra,
                )
        return list(await asyncio.gather(*(one(s, q) for s, q in jobs)))

    def run_meta(self, data_path: Path, samples: list[Sample]) -> dict[str, Any]:
        def git(*a: str) -> str:
            r = subprocess.run(
                ["git", "--no-optional-locks", *a],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            return r.stdout.strip()

        return {
            "when": datetime.now(UTC).isoformat(),
            "label": self.args.label,
            "git_commit": git("rev-parse", "HEAD"),
            "git_dirty_files": len(
                git("status", "--porcelain", "--", "app", "workers").splitlines()
            ),
            # the server inherits the environment: search settings it was started with
            "server_search_env": search_env(),
            "data": str(data_path),
            "data_sha256": hashlib.sha256(data_path.read_bytes()).hexdigest(),
            "samples": [s.sample_id for s in samples],
            "messages": sum(len(s.turns) for s in samples),
            "questions_skipped_no_evidence": sum(s.skipped for s in samples),
            "options": {
                "dates": self.args.dates,
                "concurrency": self.args.concurrency,
                "extra_body": self.extra,
                "limit": SEARCH_LIMIT,
                "rerank": False,
                "session_config": SESSION_CONFIG,
                "batch": BATCH,
                "keep_db": self.args.keep_db,
                "database": self.db if self.args.keep_db else None,
            },
            "cpus": os.cpu_count(),
            "loadavg_start": self.load_start,
            "loadavg_end": os.getloadavg(),
            "ingest_seconds": round(self.ingest_seconds, 1),
            "search_seconds": round(self.search_seconds, 1),
            "wall_seconds": round(time.time() - self.t_start, 1),
        }


def search_env() -> dict[str, str]:
    """LOOM_SEARCH_* variables the API inherits (unset ones take app/core/config.py's
    defaults)."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("LOOM_SEARCH_")}


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        n = len(rs)
        return {
            "questions": n,
            **{
                f"r@{k}": round(100 * sum(r[f"r@{k}"] for r in rs) / n, 2) if n else None
                for k in KS
            },
        }

    lat = [r["latency_ms"] for r in rows]
    return {
        "all": block(rows),
        "by_category": {
            str(c): block([r for r in rows if r["category"] == c])
            for c in sorted({r["category"] for r in rows})
        },
        "by_sample": {
            s: block([r for r in rows if r["sample_id"] == s])
            for s in dict.fromkeys(r["sample_id"] for r in rows)
        },
        "latency_ms": {
            "p50": round(percentile(lat, 50), 2),
            "p90": round(percentile(lat, 90), 2),
            "mean": round(sum(lat) / len(lat), 2) if lat else None,
            "max": round(max(lat), 2) if lat else None,
            "searches": len(lat),
        },
    }


def table(meta: dict[str, Any], figs: dict[str, Any]) -> str:
    opts = meta["options"]
    head = (
        f"LoCoMo retrieval (dev half: {', '.join(meta['samples'])}) - "
        f"{meta['when'][:19]}Z, commit {meta['git_commit'][:10]}"
        f"{', --dates' if opts['dates'] else ''}"
        f"{', extra ' + json.dumps(opts['extra_body']) if opts['extra_body'] else ''}"
        + "".join(f", {k}={v}" for k, v in meta["server_search_env"].items())
        + f"{', ' + meta['label'] if meta['label'] else ''}"
    )
    lines = [head, "", f"{'':14}{'questions':>10}{'R@5':>8}{'R@10':>8}{'R@20':>8}", "-" * 48]

    def row(name: str, b: dict[str, Any]) -> str:
        return f"{name:14}{b['questions']:>10}" + "".join(f"{b[f'r@{k}']:>8.1f}" for k in KS)

    for c, b in figs["by_category"].items():
        lines.append(row(f"category {c}", b))
    lines.append("-" * 48)
    lines.append(row("all", figs["all"]))
    lines.append("")
    for s, b in figs["by_sample"].items():
        lines.append(row(s, b))
    lat = figs["latency_ms"]
    lines += [
        "",
        f"search latency (client, {opts['concurrency']} concurrent, "
        f"{lat['searches']} searches): p50 {lat['p50']:.1f} ms, p90 {lat['p90']:.1f} ms",
        f"{meta['messages']:,} messages ingested in {meta['ingest_seconds']} s; "
        f"{meta['questions_skipped_no_evidence']} questions without existing evidence "
        f"skipped; load average {meta['loadavg_start'][0]:.1f} -> "
        f"{meta['loadavg_end'][0]:.1f}",
    ]
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help=f"LoCoMo directory or JSON file (default {DEFAULT_DATA}, i.e. "
        "../shared/data/locomo-dev from the repo root)",
    )
    parser.add_argument(
        "--samples",
        default="",
        help="comma-separated sample ids (default: all, e.g. conv-26,conv-30)",
    )
    parser.add_argument(
        "--dates",
        action="store_true",
        help="send each message's created_at: its session's date_time plus one second per turn",
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, help="concurrent search requests (default 4)"
    )
    parser.add_argument(
        "--extra-body", default="", help="JSON object merged into every search request body"
    )
    parser.add_argument("--label", default="", help="free text stored with the results")
    parser.add_argument(
        "--keep-db",
        action="store_true",
        help="do not drop the database at the end (its name is printed)",
    )
    parser.add_argument(
        "--no-latest",
        action="store_true",
        help="write only the timestamped JSON, not retrieval-latest.json",
    )
    args = parser.parse_args()
    if args.concurrency < 1:
        raise SystemExit("--concurrency must be at least 1")
    return args


def data_file(arg: str) -> Path:
    try:
        return find_data(arg)
    except FileNotFoundError as exc:
        raise SystemExit(str(exc)) from None


async def run(args: argparse.Namespace, data_path: Path, samples: list[Sample]) -> None:
    b = Retrieval(args)
    b.db_url = await b.create_db()
    try:
        _, port = b.start_api()
        limits = httpx.Limits(max_connections=max(args.concurrency, 4))
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits
        ) as client:
            await b.setup_tenant(client)
            t0 = time.perf_counter()
            for s in samples:
                await b.ingest(client, s)
                b.log(f"ingested {s.sample_id}: {len(s.turns)} turns, {len(s.questions)} questions")
            b.ingest_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            rows = await b.search_all(client, samples)
            b.search_seconds = time.perf_counter() - t0
    finally:
        b.stop_servers()
        if args.keep_db:
            print(f"kept database {b.db} ({PG.rsplit('/', 1)[0]}/{b.db})", file=sys.stderr)
        else:
            await b.drop_db()
        print(f"server logs: {b.logdir}", file=sys.stderr)

    meta = b.run_meta(data_path, samples)
    figs = figures(rows)
    text = table(meta, figs)
    print()
    print(text)
    out = {"meta": meta, "figures": figs, "table": text, "questions": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    names = [f"retrieval-{stamp}.json"] + ([] if args.no_latest else ["retrieval-latest.json"])
    for name in names:
        (RESULTS / name).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {', '.join('bench/results/' + n for n in names)}")


def main() -> None:
    args = parse_args()
    data_path = data_file(args.data)
    only = {s.strip() for s in args.samples.split(",") if s.strip()} or None
    try:
        samples = load_samples(data_path, only)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    asyncio.run(run(args, data_path, samples))


if __name__ == "__main__":
    main()

"""The LoCoMo harness: what a model would get from this memory, measured through the Python
client against any server (`loom-memory eval locomo`; README "Measuring the memory").

For every conversation, one session per token budget (the default settings but the window:
`max_context_tokens` = the budget, no output reserve), each holding the whole conversation
(one message per turn, with its original time as `created_at`), once the server's
background compression has settled. Then for every question:

* search: `POST /sessions/{id}/search` (limit 20, no rerank): recall of the evidence turns
  among the first 5, 10 and 20 results, and the latency;
* context at each budget: the build with recall on and the question as `recall.query`
  (the conversation itself is not touched, so questions do not pollute each other),
  facts too when asked for; the share of the evidence turns whose whole text is in the
  rendered context, the tokens used, the latency. Beside it the same build with recall
  off, and the plain baseline: the newest turns that fit the budget (no server build).

A question is *recent* at a budget when all its evidence lies within those newest turns:
there recall must not do worse than the plain baseline (it costs nothing).

Latencies are the client's (HTTP and JSON included), requests one at a time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.eval import measures
from app.eval.locomo_data import Sample

DEFAULT_BUDGETS = (1000, 2000, 4000, 8000)
FAST_BUDGETS = (1000, 4000)
FAST_QUESTIONS = 40
SEARCH_LIMIT = 20  # the API's maximum
MODES = ("recall", "no_recall", "last_n")


@dataclass(frozen=True)
class Options:
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    questions: int | None = None  # at most this many per conversation (the first ones)
    facts: bool = False  # facts on in the sessions' config (needs an LLM on the server)
    batch: int = 100  # messages per append
    settle_seconds: float = 10.0  # wait for compression while it makes progress
    search: bool = True
    context: bool = True
    recall: dict[str, Any] | None = None  # more recall settings (e.g. a fixed share)


Log = Callable[[str], None]


def session_config(budget: int, facts: bool) -> dict[str, Any]:
    """A session's config at a budget: defaults except the window (and facts)."""
    config: dict[str, Any] = {"max_context_tokens": budget, "reserved_output_tokens": 0}
    if facts:
        config["facts"] = {"enabled": True}
    return config


def agent_for(sample_id: str) -> str:
    """The agent of a conversation's sessions (one per conversation: facts kept for an
    agent never leak into another conversation)."""
    safe = "".join(ch if ch.isalnum() or ch in "_.:@-" else "-" for ch in sample_id)
    return f"locomo-{safe}"[:200]


async def _timed(coro: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = await coro
    return out, (time.perf_counter() - t0) * 1000


async def ingest(loom: Any, sample: Sample, session_id: str, batch: int) -> list[int]:
    """Append the conversation to a session; the messages' token counts, in order (seq n
    is the n-th turn)."""
    tokens: list[int] = []
    for start in range(0, len(sample.turns), batch):
        part = sample.turns[start : start + batch]
        body = [
            {
                "role": t.role,
                "content": t.text,
                **({"created_at": t.created_at.isoformat()} if t.created_at else {}),
            }
            for t in part
        ]
        appended = await loom.append_messages(session_id, body)
        seqs = [m.seq for m in appended.messages]
        if seqs != list(range(start + 1, start + 1 + len(part))):
            raise RuntimeError(
                f"{sample.sample_id}: the session was not empty (seqs {seqs[:3]}...)"
            )
        tokens += [m.token_count for m in appended.messages]
    return tokens


async def settle(loom: Any, session_id: str, seconds: float) -> bool:
    """Wait while the session's compression is pending and making progress (a server
    with a worker writes the summaries in the background); True when nothing is pending.
    Without a worker the build shows stand-ins for the pending part, which is measured
    as it is."""
    last: Any = None
    idle_since = time.monotonic()
    while True:
        built = await loom.build_context(session_id, format="raw", recall={"enabled": False})
        if not built.compression.pending:
            return True
        state = (tuple(built.l1_seqs), built.total_tokens)
        if state != last:
            last, idle_since = state, time.monotonic()
        elif time.monotonic() - idle_since >= seconds:
            return False
        await asyncio.sleep(min(0.5, max(seconds, 0.01)))


def _search_row(ranked: list[str], evidence: list[str], ms: float) -> dict[str, Any]:
    return {
        "ranks": {d: (ranked.index(d) + 1 if d in ranked else None) for d in evidence},
        **{f"r@{k}": measures.recall_at(ranked, evidence, k) for k in measures.KS},
        "ms": round(ms, 2),
    }


def _built_row(
    built: Any, evidence: list[str], turn_text: dict[str, str], ms: float
) -> dict[str, Any]:
    text = measures.context_text(built.system, built.messages)
    return {
        "found": measures.evidence_in(text, evidence, turn_text),
        "tokens": built.total_tokens,
        "recalled_tokens": built.tokens.get("recalled", 0),
        "recalled": len(built.recall.seqs) if built.recall else 0,
        "ms": round(ms, 2),
    }


async def run_sample(loom: Any, sample: Sample, options: Options, log: Log) -> dict[str, Any]:
    """Ingest one conversation (a session per budget) and ask its questions."""
    agent = agent_for(sample.sample_id)
    budgets = list(options.budgets) if options.context else [options.budgets[0]]
    sessions: dict[int, str] = {}
    tokens: list[int] = []
    t0 = time.perf_counter()
    for budget in budgets:
        session = await loom.create_session(
            agent_id=agent,
            config=session_config(budget, options.facts),
            metadata={"locomo_sample": sample.sample_id, "budget": budget},
        )
        sessions[budget] = session.id
        tokens = await ingest(loom, sample, session.id, options.batch)
    ingest_s = time.perf_counter() - t0
    settled = {b: await settle(loom, sid, options.settle_seconds) for b, sid in sessions.items()}
    seq_to_dia = {i + 1: t.dia_id for i, t in enumerate(sample.turns)}
    turn_text = {t.dia_id: t.text for t in sample.turns}
    index = {t.dia_id: i for i, t in enumerate(sample.turns)}
    last_n = {b: measures.last_n_that_fit(tokens, b) for b in budgets}
    # the plain baseline's text per budget: the newest turns that fit
    plain = {
        b: measures.context_text(None, [t.text for t in sample.turns[len(tokens) - n :]])
        for b, n in last_n.items()
    }
    plain_tokens = {b: sum(tokens[len(tokens) - n :]) for b, n in last_n.items()}
    questions = sample.questions[: options.questions] if options.questions else sample.questions
    search_sid = sessions[budgets[0]]
    if questions:  # warm-up (not counted): first reads, statistics folded
        await loom.search_session(
            search_sid, questions[0].question, limit=SEARCH_LIMIT, rerank=False
        )
        for sid in sessions.values():
            await loom.build_context(sid, recall={"query": questions[0].question})
    rows = []
    for q in questions:
        row: dict[str, Any] = {
            "sample_id": sample.sample_id,
            "qa_index": q.index,
            "question": q.question,
            "category": q.category,
            "evidence": q.evidence,
        }
        if options.search:
            found, ms = await _timed(
                loom.search_session(search_sid, q.question, limit=SEARCH_LIMIT, rerank=False)
            )
            ranked = [seq_to_dia.get(h.seq, f"seq{h.seq}") for h in found.results]
            row["search"] = _search_row(ranked, q.evidence, ms)
        if options.context:
            row["context"] = {}
            for b in budgets:
                sid = sessions[b]
                on, on_ms = await _timed(
                    loom.build_context(sid, recall={**(options.recall or {}), "query": q.question})
                )
                off, off_ms = await _timed(loom.build_context(sid, recall={"enabled": False}))
                newest = len(tokens) - last_n[b]
                row["context"][str(b)] = {
                    "recall": _built_row(on, q.evidence, turn_text, on_ms),
                    "no_recall": _built_row(off, q.evidence, turn_text, off_ms),
                    "last_n": {
                        "found": measures.evidence_in(plain[b], q.evidence, turn_text),
                        "tokens": plain_tokens[b],
                    },
                    "recent": all(index[d] >= newest for d in q.evidence),
                }
        rows.append(row)
    log(
        f"{sample.sample_id}: {len(sample.turns)} turns, {len(questions)} questions, "
        f"ingested in {ingest_s:.1f} s"
    )
    return {
        "sample_id": sample.sample_id,
        "turns": len(sample.turns),
        "questions": len(questions),
        "skipped_no_evidence": sample.skipped,
        "sessions": {str(b): s for b, s in sessions.items()},
        "settled": {str(b): s for b, s in settled.items()},
        "last_n_turns": {str(b): n for b, n in last_n.items()},
        "ingest_seconds": round(ingest_s, 2),
        "rows": rows,
    }


def _search_figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rs = [r["search"] for r in rows if "search" in r]
    return {
        "questions": len(rs),
        **{f"r@{k}": measures.pct([s[f"r@{k}"] for s in rs]) for k in measures.KS},
        "latency_ms": measures.latency([s["ms"] for s in rs]),
    }


def _context_figures(rows: Sequence[dict[str, Any]], budget: str) -> dict[str, Any]:
    cs = [r["context"][budget] for r in rows if budget in r.get("context", {})]
    out: dict[str, Any] = {"questions": len(cs)}
    for mode in MODES:
        out[mode] = {
            "evidence_recall": measures.pct([c[mode]["found"] for c in cs]),
            "tokens_mean": measures.mean([c[mode]["tokens"] for c in cs]),
        }
        if mode != "last_n":
            out[mode]["latency_ms"] = measures.latency([c[mode]["ms"] for c in cs])
    out["recall"]["recalled_tokens_mean"] = measures.mean(
        [c["recall"]["recalled_tokens"] for c in cs]
    )
    recent = [c for c in cs if c["recent"]]
    out["recent"] = {
        "questions": len(recent),
        **{mode: measures.pct([c[mode]["found"] for c in recent]) for mode in MODES},
        "recalled_tokens_mean": measures.mean([c["recall"]["recalled_tokens"] for c in recent]),
    }
    return out


def figures(rows: Sequence[dict[str, Any]], budgets: Sequence[int]) -> dict[str, Any]:
    """The summary of every question's row: search, and the context per budget."""
    out: dict[str, Any] = {
        "search": _search_figures(rows),
        "search_by_category": {
            str(c): _search_figures([r for r in rows if r["category"] == c])
            for c in sorted({r["category"] for r in rows})
        },
        "context": {},
    }
    for b in budgets:
        if any(str(b) in r.get("context", {}) for r in rows):
            out["context"][str(b)] = _context_figures(rows, str(b))
    return out


async def run(
    loom: Any, samples: Sequence[Sample], options: Options, log: Log = print
) -> dict[str, Any]:
    """Measure every sample through `loom` (an `AsyncLoomClient` of a tenant's service
    key); the per-sample results, every question's row and the figures."""
    per_sample = [await run_sample(loom, s, options, log) for s in samples]
    rows = [r for s in per_sample for r in s["rows"]]
    return {
        "options": asdict(options),
        "samples": [{k: v for k, v in s.items() if k != "rows"} for s in per_sample],
        "figures": figures(rows, options.budgets),
        "questions": rows,
    }

"""Token counting speed: SPEC asks for < 1 ms per 100 messages (counted once, on write).

    .venv/bin/python -m bench.tokens_bench

Prints a table and writes bench/results/tokens.json.
"""

import json
import random
import statistics
import time
from pathlib import Path

from app.core.tokens import count_message
from app.messages.canonical import canonicalise
from bench.run import conversation

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    rng = random.Random(5)
    msgs = [m for i, raw in enumerate(conversation(rng, 100)) for m in canonicalise(raw, i)][:100]
    count_message(msgs[0].role, msgs[0].content, msgs[0].tool_calls)  # load the encoding
    runs = []
    for _ in range(300):
        t0 = time.perf_counter()
        for m in msgs:
            count_message(m.role, m.content, m.tool_calls)
        runs.append((time.perf_counter() - t0) * 1000)
    runs.sort()
    chars = sum(len(m.text) for m in msgs)
    out = {
        "messages": len(msgs),
        "chars": chars,
        "p50_ms": round(runs[len(runs) // 2], 3),
        "p99_ms": round(runs[int(len(runs) * 0.99)], 3),
        "mean_ms": round(statistics.fmean(runs), 3),
        "target_ms": 1.0,
    }
    print(
        f"{'token counting, 100 messages':<32}p50 {out['p50_ms']:.3f} ms  p99 "
        f"{out['p99_ms']:.3f} ms  ({chars:,} chars; target < 1 ms)"
    )
    (ROOT / "bench" / "results" / "tokens.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()

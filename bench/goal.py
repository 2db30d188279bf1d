"""Issue 29's goal figures from `bench.run` result files, each against the floor of its own run.

    .venv/bin/python -m bench.goal bench/results/bench-*.json

Per file: context build of random 50-message sessions at 1 client (p50 / the read floor's,
goal <= 1.5x) and at 32 clients (req/s / the floor's, goal >= 0.7x; p99 / the floor's,
goal <= 3x), and the 1-message append at 32 clients (req/s / the single-insert floor's,
goal >= 0.6x); then the range of each ratio over the files.

Ratios of files measured against different floors do not compare: the floor of each file
is printed (`meta.floor`; files without it used the floor before issue 39: two queries,
stdlib json, a four-round-trip append).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

GOALS = (  # (label, api result, floor result, field, goal, at least?)
    ("context 32c req/s", "context_50_32c", "floor_read_50_32c", "rps", 0.7, True),
    ("context 1c p50", "context_50_1c", "floor_read_50_1c", "p50_ms", 1.5, False),
    ("context 32c p99", "context_50_32c", "floor_read_50_32c", "p99_ms", 3.0, False),
    ("append 32c req/s", "append_1_32c", "floor_append_1_32c", "rps", 0.6, True),
)


def ratios(doc: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    res = doc["results"]
    out = {}
    for label, api, floor, field, _, _ in GOALS:
        if api in res and floor in res:
            a, f = res[api][field], res[floor][field]
            out[label] = (a, f, a / f if f else float("nan"))
    return out


def main(paths: list[str]) -> None:
    seen: dict[str, list[float]] = {g[0]: [] for g in GOALS}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        meta = doc.get("meta", {})
        print(
            f"\n{Path(path).name}  commit {meta.get('git_commit') or '?'}  "
            f"{meta.get('label', '')}  load {meta.get('loadavg_start', '')}"
        )
        print(f"  floor: {meta.get('floor', 'before issue 39 (two queries, stdlib json)')}")
        for label, (a, f, r) in ratios(doc).items():
            goal = next(g for g in GOALS if g[0] == label)
            ok = r >= goal[4] if goal[5] else r <= goal[4]
            sign = ">=" if goal[5] else "<="
            print(
                f"  {label:<18} {a:>9.2f} vs floor {f:>9.2f} = {r:5.2f}x  "
                f"(goal {sign} {goal[4]:g}x) {'ok' if ok else 'MISS'}"
            )
            seen[label].append(r)
    print("\nranges over the files:")
    for label, values in seen.items():
        if values:
            print(f"  {label:<18} {min(values):.2f}x - {max(values):.2f}x ({len(values)} runs)")


if __name__ == "__main__":
    main(sys.argv[1:])

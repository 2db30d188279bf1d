"""Where a batch append's Python time goes, per message: the pure parts of
`POST /v1/sessions/{id}/messages` (no database, no HTTP), timed one after another in
interleaved rounds on `bench.run`'s request bodies (its "append batches of 20" figure), as
this process's CPU time (what other processes on a busy machine move least).

    .venv/bin/python -m bench.append_parts                      # batches of 20
    .venv/bin/python -m bench.append_parts --batch 1 --rounds 400
    BENCH_SOURCE=/path/to/another/checkout .venv/bin/python -m bench.append_parts

Parts (microseconds per message; the minimum and the median over the rounds):

* `validate`: the body through the route's model (`MessagesAppend`);
* `sizes`: the per-message size check (`check_sizes`);
* `shape`: `model_dump` and the canonical shape (`canonicalise` without its storable check);
* `storable`: the storable-value check of each canonical message (`app.core.storable`, issue
  44; absent before it);
* `tokens`: text and token count (tiktoken) of each message;
* `prior`: the informativeness prior and time flag of the batch (`app.messages.prior.priors`
  and the first row's answer variant, issue 48; absent before it);
* `params`: the append statement's JSON parameters (content, tool calls, metadata).

`BENCH_SOURCE` runs another checkout's app with this virtualenv (the request bodies stay
this checkout's). `bench.inprocess --batch 20` times the whole request in one process;
`bench.run --only append` the served figure against its floor.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def parts(bodies: list[dict[str, Any]]) -> dict[str, Callable[[], object]]:
    """The timed parts, each over every body once."""
    from app.core.pg import dumps
    from app.messages import canonical as canon
    from app.messages.schemas import MessagesAppend
    from app.messages.service import check_sizes

    models = [MessagesAppend.model_validate(b) for b in bodies]
    dumped = [[m.model_dump(exclude_none=True) for m in b.messages] for b in models]
    shaped = getattr(canon, "_shaped", canon.canonicalise)
    batches = [[c for i, d in enumerate(ds) for c in shaped(d, i)] for ds in dumped]

    def sizes() -> None:
        for b in models:
            check_sizes(b, 1 << 30)

    out: dict[str, Callable[[], object]] = {
        "validate": lambda: [MessagesAppend.model_validate(b) for b in bodies],
        "sizes": sizes,
        "shape": lambda: [
            [shaped(m.model_dump(exclude_none=True), i) for i, m in enumerate(b.messages)]
            for b in models
        ],
    }
    check = getattr(canon, "_check_storable", None)
    if check is not None:
        out["storable"] = lambda: [[check(c, 0) for c in cs] for cs in batches]
    out["tokens"] = lambda: [[c.text_and_tokens() for c in cs] for cs in batches]
    texts = [[(c.role, c.text_and_tokens()[0]) for c in cs] for cs in batches]
    try:
        from app.messages import prior as turn_prior
    except ImportError:  # before issue 48
        pass
    else:

        def prior() -> None:
            for rows in texts:
                got = turn_prior.priors(rows)
                turn_prior.as_answer(got[0][0])

        out["prior"] = prior
    out["params"] = lambda: [
        (
            [dumps(c.content) for c in cs],
            [dumps(c.tool_calls) if c.tool_calls else None for c in cs],
            [dumps(c.metadata or {}) for c in cs],
        )
        for cs in batches
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=20, help="messages per request body")
    ap.add_argument("--bodies", type=int, default=50, help="request bodies per round")
    ap.add_argument("--rounds", type=int, default=60)
    args = ap.parse_args()
    from bench.run import conversation  # before another checkout goes first on the path

    source = os.environ.get("BENCH_SOURCE")
    if source:
        sys.path.insert(0, source)
    rng = random.Random(5)
    bodies = [{"messages": conversation(rng, args.batch)} for _ in range(args.bodies)]
    timed = parts(bodies)
    from app.messages.schemas import MessagesAppend

    n = sum(len(MessagesAppend.model_validate(b).messages) for b in bodies)
    runs: dict[str, list[float]] = {k: [] for k in timed}
    for _ in range(args.rounds):
        for name, fn in timed.items():
            t = time.process_time_ns()
            fn()
            runs[name].append((time.process_time_ns() - t) / n / 1e3)
    where = os.path.dirname(os.path.dirname(sys.modules["app"].__file__ or ""))
    print(f"app from {where}; {n} messages a round in bodies of {args.batch}, {args.rounds} rounds")
    print(f"{'part':10s} {'min':>8s} {'median':>8s}  us/msg (CPU)")
    total_min = total_med = 0.0
    for name, values in runs.items():
        lo, med = min(values), statistics.median(values)
        total_min, total_med = total_min + lo, total_med + med
        print(f"{name:10s} {lo:8.2f} {med:8.2f}")
    print(f"{'sum':10s} {total_min:8.2f} {total_med:8.2f}")


if __name__ == "__main__":
    main()

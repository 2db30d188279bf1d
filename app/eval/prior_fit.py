"""Refit the informativeness prior (`app.messages.prior`) on LoCoMo: a logistic regression
of "this turn is evidence for some question" over the model's features, by Newton's
method (a few features, a few thousand turns: no library needed).

    .venv/bin/python -m app.eval.prior_fit --data ../shared/data/locomo-dev

The length feature is log(1 + |d|), |d| the turn's BM25 length (lexeme positions of
`to_tsvector('english', text)`, as `messages.search_length` holds it): it needs a
PostgreSQL (`--dsn`, default $DATABASE_URL or the local one) for the vectors, nothing
else. Prints the weights as `app/messages/prior.py` spells them; paste them there, then
measure the search with `loom-memory eval locomo` (docs/search-prior.md) before keeping
them, and backfill the stored priors (the migration's `backfill`).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os

import asyncpg

from app.eval.locomo_data import data_file, load_samples
from app.messages import prior as turn_prior

_LENGTHS = """
SELECT (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)
        FROM unnest(to_tsvector('english'::regconfig, t)) u)
FROM unnest($1::text[]) WITH ORDINALITY AS x(t, i) ORDER BY i
"""


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[c][c]:
                f = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    return [m[i][n] / m[i][i] if m[i][i] else 0.0 for i in range(n)]


def fit(x: list[list[float]], y: list[float], l2: float = 1e-3) -> list[float]:
    """Intercept first, then one weight per column of `x` (L2-regularised Newton)."""
    d = len(x[0]) + 1
    w = [0.0] * d
    rows = [[1.0, *r] for r in x]
    for _ in range(50):
        g = [0.0] * d
        h = [[0.0] * d for _ in range(d)]
        for z, t in zip(rows, y, strict=True):
            s = sum(a * b for a, b in zip(w, z, strict=True))
            p = 1.0 / (1.0 + math.exp(-s))
            e, v = p - t, p * (1 - p)
            for i in range(d):
                g[i] += e * z[i]
                for j in range(d):
                    h[i][j] += v * z[i] * z[j]
        for i in range(1, d):
            g[i] += l2 * w[i]
            h[i][i] += l2
        step = _solve(h, g)
        w = [a - b for a, b in zip(w, step, strict=True)]
        if max(abs(s) for s in step) < 1e-9:
            break
    return w


async def rows(data: str, dsn: str) -> tuple[list[list[float]], list[float]]:
    """The features (the model's, then the length) and the label of every turn."""
    samples = load_samples(data_file(data))
    conn = await asyncpg.connect(dsn)
    try:
        x: list[list[float]] = []
        y: list[float] = []
        for s in samples:
            evidence = {d for q in s.questions for d in q.evidence}
            lengths = [r[0] for r in await conn.fetch(_LENGTHS, [t.text for t in s.turns])]
            before = None
            for t, dl in zip(s.turns, lengths, strict=True):
                f = turn_prior.features(t.text, t.role, before)
                x.append([f[k] for k in turn_prior.WEIGHTS] + [math.log1p(dl)])
                y.append(1.0 if t.dia_id in evidence else 0.0)
                before = turn_prior.Before(t.role, turn_prior.asks(t.text))
        return x, y
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="LoCoMo JSON file (or its directory)")
    ap.add_argument(
        "--dsn",
        default=os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL for the text vectors (default $DATABASE_URL or the local one)",
    )
    args = ap.parse_args(argv)
    dsn = args.dsn.replace("postgresql+asyncpg://", "postgresql://")
    x, y = asyncio.run(rows(args.data, dsn))
    w = fit(x, y)
    print(f"{len(y)} turns, {sum(y):.0f} evidence ({100 * sum(y) / len(y):.1f}%)")
    print(f"INTERCEPT = {w[0]:.3f}")
    print("WEIGHTS: dict[str, float] = {")
    for name, value in zip(turn_prior.WEIGHTS, w[1:-1], strict=True):
        print(f'    "{name}": {value:.3f},')
    print("}")
    print(f"LENGTH_WEIGHT = {w[-1]:.3f}")


if __name__ == "__main__":
    main()

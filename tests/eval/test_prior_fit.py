"""The prior's refit (`app.eval.prior_fit.fit`): Newton's logistic regression recovers the
weights that generated the labels."""

from __future__ import annotations

import math
import random

from app.eval.prior_fit import fit


def test_fit_recovers_known_weights() -> None:
    rng = random.Random(3)
    true = [-1.0, 2.0, -0.5]
    x, y = [], []
    for _ in range(4000):
        row = [rng.gauss(0, 1), rng.random()]
        z = true[0] + true[1] * row[0] + true[2] * row[1]
        x.append(row)
        y.append(1.0 if rng.random() < 1 / (1 + math.exp(-z)) else 0.0)
    w = fit(x, y)
    assert all(abs(a - b) < 0.25 for a, b in zip(w, true, strict=True)), w

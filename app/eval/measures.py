"""What the LoCoMo harness computes from the answers (pure: no I/O): recall of evidence
turns among search results and inside a rendered context, the plain "last N messages that
fit" baseline, percentiles and the summary figures."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

KS = (5, 10, 20)


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * p / 100
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """The share of `evidence` among the first `k` of `ranked`."""
    return len(set(ranked[:k]) & set(evidence)) / len(evidence)


def flat(text: str) -> str:
    """Whitespace collapsed (a summary may re-flow the text it quotes)."""
    return " ".join(text.split())


def _texts(value: Any) -> Iterable[str]:
    """Every string inside a context payload (system blocks, message contents, tool
    inputs and results), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def context_text(system: Any, messages: Any) -> str:
    """A rendered context as one searchable text (whitespace collapsed)."""
    return flat("\n".join([*_texts(system), *_texts(messages)]))


def evidence_in(text: str, evidence: Sequence[str], turn_text: Mapping[str, str]) -> float:
    """The share of the evidence turns whose whole text is in `text` (`context_text`)."""
    return sum(1 for d in evidence if flat(turn_text[d]) in text) / len(evidence)


def last_n_that_fit(token_counts: Sequence[int], budget: int) -> int:
    """How many of the newest messages fit `budget` tokens together (the plain baseline:
    history cut from the front, nothing summarised or recalled)."""
    total = n = 0
    for tokens in reversed(token_counts):
        if total + tokens > budget:
            break
        total += tokens
        n += 1
    return n


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def latency(values: Sequence[float]) -> dict[str, float | None]:
    """p50 / p95 / max of milliseconds, rounded."""

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 2)

    return {
        "p50": r(percentile(values, 50)),
        "p95": r(percentile(values, 95)),
        "max": r(max(values) if values else None),
        "n": len(values),
    }


def pct(values: Sequence[float]) -> float | None:
    m = mean(values)
    return None if m is None else round(100 * m, 2)

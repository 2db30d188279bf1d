"""Budget split across the knowledge tiers (pure, no I/O).

Seed default: task 40%, project 40%, global 20%, adjustable per request.
Decision (spec silent): shares are each in [0, 1] and must sum to at most 1
(a sum below 1 leaves part of the budget unused on purpose); each tier's
allowance is ``floor(budget * share)``, so the allowances never add up to more
than the budget. Unused allowance of one tier is NOT given to another: a
tier's share is a hard cap, which is what callers tune the shares for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Tier = Literal["task", "project", "global"]
TIERS: tuple[Tier, ...] = ("task", "project", "global")
_EPS = 1e-9


class BudgetError(ValueError):
    """Shares or budget are invalid."""


@dataclass(frozen=True, slots=True)
class TierShares:
    """Fraction of the package budget each tier may use."""

    task: float = 0.4
    project: float = 0.4
    global_: float = 0.2

    def __post_init__(self) -> None:
        for tier in TIERS:
            v = self.of(tier)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
                raise BudgetError(f"share for {tier!r} must be a number from 0 to 1")
        total = self.task + self.project + self.global_
        if total > 1 + _EPS:
            raise BudgetError(f"shares sum to {total:g}; they must sum to at most 1")

    def of(self, tier: Tier) -> float:
        """The share of one tier."""
        return self.global_ if tier == "global" else getattr(self, tier)


DEFAULT_SHARES = TierShares()


def allocate(budget_tokens: int, shares: TierShares = DEFAULT_SHARES) -> dict[Tier, int]:
    """Token allowance per tier: ``floor(budget * share)``; the sum never exceeds the budget."""
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
        raise BudgetError("budget_tokens must be a non-negative integer")
    out = {t: math.floor(budget_tokens * shares.of(t) + _EPS) for t in TIERS}
    # Float rounding could push the sum one token over when shares sum to exactly 1.
    while sum(out.values()) > budget_tokens:
        biggest = max(TIERS, key=lambda t: out[t])
        out[biggest] -= 1
    return out

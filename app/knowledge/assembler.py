"""Context-package assembly from the three knowledge tiers (pure, no I/O).

Given candidate items of each tier and a token budget:

1. The budget is split per tier (``budget.allocate``; 40/40/20 by default).
2. Within a tier, candidates are ranked by importance (highest first); ties go
   to the newest item, then to the id, so the result is deterministic.
3. Optional head/tail preservation (``head_tail=N``): the N oldest and N newest
   candidates of the tier (by ``created_at``) are taken first, the rest by rank.
   This keeps the beginning and the end of a tier's timeline, the usual meaning
   of head/tail preservation (the seed's reordering by importance was a no-op).
   With head/tail on, a tier's selected items are listed chronologically.
4. Greedy fill: walk the priority order and take every item whose
   ``token_cost`` still fits in the tier's allowance; an item that does not fit
   is skipped (smaller ones after it may still fit).

Guarantees (property-tested): per tier, used tokens <= allowance; in total,
used tokens <= budget.

``compression_ratio`` = tokens of the included items / tokens of all candidate
items (of all tiers), in [0, 1]: 1.0 means nothing was left out, 0.25 means the
package carries a quarter of the candidate tokens. With no candidate tokens at
all it is 1.0 (nothing had to be compressed). This is the seed's
``current_cost / total_cost``, except the seed's 0 for an empty store.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from app.knowledge.budget import DEFAULT_SHARES, TIERS, Tier, TierShares, allocate

K = TypeVar("K", bound=Hashable)  # the item id type (a UUID for stored items)


@dataclass(frozen=True, slots=True)
class Candidate(Generic[K]):
    """What assembly needs to know about one item."""

    id: K
    tier: Tier
    importance: float
    created_at: datetime
    token_cost: int


@dataclass(slots=True)
class TierUsage:
    """Per-tier accounting of a package."""

    allowance: int = 0
    used_tokens: int = 0
    candidate_tokens: int = 0
    candidate_count: int = 0
    included_count: int = 0


@dataclass(slots=True)
class Package(Generic[K]):
    """The assembled selection. ``items`` are ordered task, project, global."""

    budget_tokens: int
    items: list[Candidate[K]] = field(default_factory=list)
    tiers: dict[Tier, TierUsage] = field(default_factory=dict)

    @property
    def used_tokens(self) -> int:
        """Sum of the included items' token costs."""
        return sum(u.used_tokens for u in self.tiers.values())

    @property
    def candidate_tokens(self) -> int:
        """Sum of the token costs of every candidate, included or not."""
        return sum(u.candidate_tokens for u in self.tiers.values())

    @property
    def compression_ratio(self) -> float:
        """Included tokens / candidate tokens (1.0 when there were no candidate tokens)."""
        total = self.candidate_tokens
        return 1.0 if total == 0 else self.used_tokens / total


def rank_key(c: Candidate[K]) -> tuple[float, float, str]:
    """Importance descending, then newest first, then id."""
    return (-c.importance, -c.created_at.timestamp(), str(c.id))


def priority_order(
    items: Sequence[Candidate[K]], head_tail: int | None = None
) -> list[Candidate[K]]:
    """The order in which one tier's candidates are considered for inclusion."""
    ranked = sorted(items, key=rank_key)
    if not head_tail or head_tail <= 0 or len(items) <= 2 * head_tail:
        return ranked
    chrono = sorted(items, key=lambda c: (c.created_at, str(c.id)))
    preserved = chrono[:head_tail] + chrono[-head_tail:]
    seen = {c.id for c in preserved}
    return preserved + [c for c in ranked if c.id not in seen]


def select_tier(
    items: Sequence[Candidate[K]], allowance: int, head_tail: int | None = None
) -> list[Candidate[K]]:
    """Greedy fill of one tier within ``allowance`` tokens, in priority order."""
    chosen: list[Candidate[K]] = []
    used = 0
    for c in priority_order(items, head_tail):
        if c.token_cost < 0:
            raise ValueError("token_cost must be >= 0")
        if used + c.token_cost <= allowance:
            chosen.append(c)
            used += c.token_cost
    if head_tail:
        chosen.sort(key=lambda c: (c.created_at, str(c.id)))
    return chosen


def assemble(
    candidates: Iterable[Candidate[K]],
    budget_tokens: int,
    shares: TierShares = DEFAULT_SHARES,
    *,
    head_tail: int | None = None,
    candidate_totals: dict[Tier, tuple[int, int]] | None = None,
) -> Package[K]:
    """Select items per tier within the budget split.

    ``candidate_totals`` (tier -> (count, tokens)) overrides the accounting of
    candidates when the caller pre-filtered them (e.g. the repository only loads
    items that could fit), so the compression ratio still covers every item.
    """
    allowance = allocate(budget_tokens, shares)
    by_tier: dict[Tier, list[Candidate[K]]] = {t: [] for t in TIERS}
    for c in candidates:
        by_tier[c.tier].append(c)
    pkg: Package[K] = Package(budget_tokens=budget_tokens)
    for tier in TIERS:
        items = by_tier[tier]
        chosen = select_tier(items, allowance[tier], head_tail)
        count, tokens = (candidate_totals or {}).get(
            tier, (len(items), sum(c.token_cost for c in items))
        )
        pkg.tiers[tier] = TierUsage(
            allowance=allowance[tier],
            used_tokens=sum(c.token_cost for c in chosen),
            candidate_tokens=tokens,
            candidate_count=count,
            included_count=len(chosen),
        )
        pkg.items.extend(chosen)
    return pkg

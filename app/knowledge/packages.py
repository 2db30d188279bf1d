"""Context packages: load candidates per tier in SQL, select with assembler.py.

Only light columns of items that could fit a tier's allowance are loaded
(at most ``max_candidates`` per tier, in rank order), plus exact per-tier
totals for the compression ratio; full rows are loaded for the chosen items.
Decision: when a tier has more fitting items than ``max_candidates`` the
greedy fill only considers the best-ranked ``max_candidates`` of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import asyncpg

from app.core.tokens import count_text
from app.knowledge import repository
from app.knowledge.asof import read_then
from app.knowledge.assembler import Candidate, Package, assemble
from app.knowledge.budget import Tier, TierShares, allocate
from app.knowledge.filters import Condition
from app.knowledge.render import fit_lines, item_line
from app.knowledge.schemas import (
    ContextPackageCreate,
    ContextPackagePublic,
    PackageItem,
    TierSharesIn,
    TierUsagePublic,
)
from app.knowledge.scopes import GLOBAL, Scope
from app.knowledge.service import parse_filters, to_public


@dataclass(slots=True)
class BuiltPackage:
    package: Package[uuid.UUID]
    rows: list[tuple[Tier, Any]]  # (tier, memory_items row), in package order
    header: str


def tier_scopes(
    task_id: str | None, project_id: str | None, include_global: bool
) -> dict[Tier, Scope]:
    """The scope each tier reads; a tier without an id contributes nothing."""
    out: dict[Tier, Scope] = {}
    if task_id:
        out["task"] = Scope("task", task_id)
    if project_id:
        out["project"] = Scope("project", project_id)
    if include_global:
        out["global"] = GLOBAL
    return out


def shares_of(s: TierSharesIn) -> TierShares:
    return TierShares(task=s.task, project=s.project, global_=s.global_)


def header_for(scopes: dict[Tier, Scope]) -> str:
    return "Knowledge (" + ", ".join(str(s) for s in scopes.values()) + "):"


async def build(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    *,
    task_id: str | None,
    project_id: str | None,
    include_global: bool,
    budget_tokens: int,
    shares: TierShares,
    head_tail: int | None,
    conditions: Sequence[Condition] = (),
    max_candidates: int = 2000,
    as_of: datetime | None = None,
) -> BuiltPackage:
    """Assemble a package for the given tiers within ``budget_tokens`` (with ``as_of``: of
    the items true then, as they read then)."""
    scopes = tier_scopes(task_id, project_id, include_global)
    allowance = allocate(budget_tokens, shares)
    raw = await repository.tier_totals(conn, tenant_id, list(scopes.values()), conditions, as_of)
    totals: dict[Tier, tuple[int, int]] = {t: raw.get(t, (0, 0)) for t in scopes}
    open_tiers = [(scopes[t], allowance[t]) for t in scopes if totals[t][0] and allowance[t]]
    rows = await repository.tier_candidates(
        conn, tenant_id, open_tiers, conditions, limit=max_candidates, as_of=as_of
    )
    if head_tail:
        seen = {r.id for r in rows}
        for scope, cap in open_tiers:
            more = await repository.head_tail_candidates(
                conn, tenant_id, scope, conditions, max_cost=cap, n=head_tail, as_of=as_of
            )
            rows += [r for r in more if r.id not in seen]
            seen |= {r.id for r in more}
    # scope kind == tier name (task / project / global)
    cands: list[Candidate[uuid.UUID]] = [
        Candidate(
            id=r.id,
            tier=cast(Tier, r.scope_kind),
            importance=r.importance,
            created_at=r.created_at,
            token_cost=r.token_cost,
        )
        for r in rows
    ]
    pkg = assemble(cands, budget_tokens, shares, head_tail=head_tail, candidate_totals=totals)
    fetched: list[Any] = await repository.get_rows(conn, tenant_id, [c.id for c in pkg.items])
    if as_of is not None:
        fetched = await read_then(conn, tenant_id, fetched, as_of)
    full = {r.id: r for r in fetched}
    rows_out = [(c.tier, full[c.id]) for c in pkg.items if c.id in full]
    return BuiltPackage(pkg, rows_out, header_for(scopes))


def render(built: BuiltPackage) -> str:
    """The package as a plain-text block (header + one line per item, package order)."""
    lines = [item_line(r.kind, r.text, r.payload) for _, r in built.rows]
    return "\n".join([built.header, *lines]) if lines else ""


async def create_package(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    body: ContextPackageCreate,
    *,
    max_candidates: int,
) -> ContextPackagePublic:
    """POST /v1/context-packages."""
    conditions = parse_filters(body.filters).conditions
    built = await build(
        conn,
        tenant_id,
        task_id=body.task_id,
        project_id=body.project_id,
        include_global=body.include_global,
        budget_tokens=body.budget_tokens,
        shares=shares_of(body.shares),
        head_tail=body.head_tail,
        conditions=conditions,
        max_candidates=max_candidates,
        as_of=body.as_of,
    )
    pkg = built.package
    return ContextPackagePublic(
        budget_tokens=pkg.budget_tokens,
        used_tokens=pkg.used_tokens,
        compression_ratio=pkg.compression_ratio,
        tiers={
            t: TierUsagePublic(
                allowance=u.allowance,
                used_tokens=u.used_tokens,
                candidate_tokens=u.candidate_tokens,
                candidate_count=u.candidate_count,
                included_count=u.included_count,
            )
            for t, u in pkg.tiers.items()
        },
        items=[PackageItem(**to_public(r).model_dump(), tier=t) for t, r in built.rows],
        text=render(built),
    )


async def knowledge_block(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    *,
    task_id: str | None,
    project_id: str | None,
    include_global: bool,
    budget: int,
    shares: TierShares,
    head_tail: int | None,
    max_candidates: int,
) -> tuple[str, str, list[tuple[str, Any]]] | None:
    """A knowledge block for a session context, re-counted so it never exceeds ``budget``,
    with what it was made of: (text, header, [(tier, item row)] in package order); the
    text is `block_from_rows(header, rows, budget)`.

    The package is sized for ``budget`` minus the header; joining lines can cost a token or
    two more than the per-item counts, so the final text is counted and the lowest-priority
    lines dropped until it fits."""
    scopes = tier_scopes(task_id, project_id, include_global)
    if not scopes or budget <= 0:
        return None
    header = header_for(scopes)
    inner = budget - count_text(header) - 1
    if inner <= 0:
        return None
    built = await build(
        conn,
        tenant_id,
        task_id=task_id,
        project_id=project_id,
        include_global=include_global,
        budget_tokens=inner,
        shares=shares,
        head_tail=head_tail,
        max_candidates=max_candidates,
    )
    text = block_from_rows(header, [r for _, r in built.rows], budget)
    return (text, header, list(built.rows)) if text else None


def block_from_rows(header: str, rows: Sequence[Any], budget: int) -> str | None:
    """The knowledge block's text from its items, in package order (pure)."""
    lines = [item_line(r.kind, r.text, r.payload) for r in rows]
    return fit_lines(header, lines, budget, count_text) if lines else None

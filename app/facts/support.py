"""A deleted session takes away its support, not other sessions' facts (issue 37, finding 2).

Deleting the session that first mentioned a peanut allergy used to delete the allergy,
though a later session had restated it; deleting the session that said "I moved to Berlin"
left no current home (Paris stayed invalidated by a fact that no longer existed). Now,
before the session's rows go (`app.erasure.runner.erase_session`, in the transaction of
the deletion):

- a fact some other source still supports stays: the session leaves its `sources` (and
  its `source_session_id`/`source_seqs` name the latest other source), the removal
  recorded as a version `unsupport`, and its earlier versions stop naming the session;
- a fact whose last support is gone goes with its history (the erasure's delete), and
  each fact it had superseded takes over its end: current again (a version `restore`)
  when it was current, else replaced by whatever replaced it; through several doomed
  facts in a row.

`plan_release` is the rule, with no I/O; `release_session` the SQL around it. Erasing a
user still removes everything of that user: each of its sessions goes this way, then its
own tier.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from app.facts.policy import FACT_KIND
from app.knowledge import versions
from app.knowledge.timeline import merge_sources
from app.models.base import table_of
from app.models.memory_item import MemoryItem

M = table_of(MemoryItem).c
V = versions.V
ERASURE = versions.Actor("erasure")


@dataclass(frozen=True, slots=True)
class Supported:
    """What the rule reads of a fact: its sources, and how it ended."""

    id: Any
    sources: Sequence[Mapping[str, Any]]
    source_session_id: str | None
    invalid_at: datetime | None = None
    superseded_by: Any | None = None


@dataclass(frozen=True, slots=True)
class Release:
    """What a session delete changes: facts kept with their other sources, facts that go,
    and facts that take over the end of the ones that go (id -> (invalid_at,
    superseded_by))."""

    kept: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)
    doomed: frozenset[Any] = frozenset()
    restored: dict[Any, tuple[datetime | None, Any | None]] = field(default_factory=dict)


def without(sources: Sequence[Mapping[str, Any]], session: str) -> list[dict[str, Any]]:
    return [dict(s) for s in merge_sources(sources) if str(s.get("session_id")) != session]


def plan_release(
    touched: Sequence[Supported], neighbours: Sequence[Supported], session: str
) -> Release:
    """`touched`: the facts the session supports (`sources` names it, or it is their
    source); `neighbours`: facts whose `superseded_by` names one of them. A touched fact
    with another source is kept; without one it goes; a neighbour that is not doomed and
    was superseded by a doomed fact ends where the first surviving successor begins (None:
    current again)."""
    kept: dict[Any, list[dict[str, Any]]] = {}
    doomed: set[Any] = set()
    for f in touched:
        rest = without(f.sources, session)
        if rest:
            kept[f.id] = rest
        else:
            doomed.add(f.id)
    by_id = {f.id: f for f in touched}
    restored: dict[Any, tuple[datetime | None, Any | None]] = {}
    for n in [*touched, *neighbours]:
        if n.id in doomed or n.superseded_by not in doomed:
            continue
        end, succ = n.invalid_at, n.superseded_by
        seen: set[Any] = set()
        while succ in doomed and succ not in seen:
            seen.add(succ)
            d = by_id[succ]
            end, succ = d.invalid_at, d.superseded_by
        restored[n.id] = (end if succ is not None else None, succ)
    return Release(kept, frozenset(doomed), restored)


def _supported(r: MemoryItem) -> Supported:
    return Supported(
        r.id,
        list(r.sources or []),
        str(r.source_session_id) if r.source_session_id else None,
        r.invalid_at,
        r.superseded_by,
    )


async def release_session(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> int:
    """Apply `plan_release` for a session about to be deleted (the caller's transaction;
    the erasure then deletes the facts still drawn from it). Returns the facts kept."""
    sid = str(session_id)
    names = sa.or_(
        M.source_session_id == session_id,
        M.sources.op("@>")(sa.cast([{"session_id": sid}], sa.dialects.postgresql.JSONB)),
    )
    touched = list(
        (
            await db.execute(
                sa.select(MemoryItem)
                .where(M.tenant_id == tenant_id, M.kind == FACT_KIND, names)
                .order_by(M.id)
                .with_for_update()
            )
        ).scalars()
    )
    if not touched:
        return 0
    ids = [t.id for t in touched]
    neighbours = list(
        (
            await db.execute(
                sa.select(MemoryItem)
                .where(M.tenant_id == tenant_id, M.superseded_by.in_(ids), M.id.not_in(ids))
                .order_by(M.id)
                .with_for_update()
            )
        ).scalars()
    )
    plan = plan_release([_supported(t) for t in touched], [_supported(n) for n in neighbours], sid)
    items = {r.id: r for r in [*touched, *neighbours]}
    now = datetime.now(UTC)
    for fid, rest in plan.kept.items():
        item = items[fid]
        item.sources = rest
        if item.source_session_id == session_id:
            latest = rest[-1]
            item.source_session_id = uuid.UUID(str(latest["session_id"]))
            item.source_seqs = list(latest["seqs"])
        item.version += 1
        item.updated_at = now
        await db.flush()
        await versions.record(
            db, item, "unsupport", ERASURE, f"session {sid} deleted: it no longer supports this"
        )
        await _forget_in_versions(db, tenant_id, fid, session_id)
    for fid, (end, succ) in plan.restored.items():
        item = items[fid]
        item.invalid_at, item.superseded_by = end, succ
        item.version += 1
        item.updated_at = now
        await db.flush()
        why = "true again" if succ is None else f"now replaced by fact {succ}"
        await versions.record(
            db,
            item,
            "restore",
            ERASURE,
            f"the fact that replaced it went with session {sid}: {why}",
        )
    return len(plan.kept)


async def _forget_in_versions(
    db: AsyncSession, tenant_id: uuid.UUID, item_id: uuid.UUID, session_id: uuid.UUID
) -> None:
    """A kept fact's earlier versions stop naming the deleted session as a source (the
    erasure deletes versions whose source is the session)."""
    rows = await db.execute(
        sa.select(V.c.version, V.c.sources, V.c.source_session_id).where(
            V.c.tenant_id == tenant_id, V.c.item_id == item_id
        )
    )
    for version, sources, source in rows.all():
        rest = without(sources or [], str(session_id))
        if source != session_id and rest == list(sources or []):
            continue
        values: dict[str, Any] = {"sources": rest}
        if source == session_id:
            values.update(source_session_id=None, source_seqs=[])
        await db.execute(
            sa.update(V)
            .where(V.c.tenant_id == tenant_id, V.c.item_id == item_id, V.c.version == version)
            .values(**values)
        )

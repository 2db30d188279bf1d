"""A deleted session takes away its support, not other sessions' facts.

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

A kept fact is re-dated to its earliest remaining source (a peanut allergy said
on 2024-11-20 in the deleted session and again on 2025-08-01 kept `valid_from`
2024-11-20): when the deleted session said it first, it was said (`stated_at`) when the
earliest remaining statement was written, and true (`valid_from`) from then at the
earliest; a fact it had replaced at its old start now ends at its new one.

`plan_release` and `redate` are the rules, with no I/O; `release_session` applies them
(the statements are `app.facts.repository`'s). Erasing a user still removes everything of
that user: each of its sessions goes this way, then its own tier.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from app.facts import repository as repo
from app.facts.item import Fact, Facts
from app.knowledge import versions
from app.knowledge.timeline import merge_sources

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


def _supported(r: Fact) -> Supported:
    return Supported(
        r.id,
        list(r.sources or []),
        str(r.source_session_id) if r.source_session_id else None,
        r.invalid_at,
        r.superseded_by,
    )


def redate(
    valid_from: datetime | None, stated_at: datetime | None, earliest: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """A kept fact's (valid_from, stated_at) once the deleted session's statements are
    gone: when it was said before its earliest remaining statement (`earliest`),
    it was first said then, and became true then at the earliest (an event time after it
    stays). Else unchanged."""
    if earliest is None or stated_at is None or stated_at >= earliest:
        return valid_from, stated_at
    start = earliest if valid_from is None or valid_from < earliest else valid_from
    return start, earliest


async def release_session(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> int:
    """Apply `plan_release` for a session about to be deleted (the caller's transaction;
    the erasure then deletes the facts still drawn from it). Returns the facts kept."""
    sid = str(session_id)
    facts = Facts()
    touched = facts.all(await repo.facts_of_session(conn, tenant_id, session_id))
    if not touched:
        return 0
    ids = [t.id for t in touched]
    neighbours = facts.all(await repo.replaced_by_any(conn, tenant_id, ids))
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
        old_start = item.valid_from
        earliest = await repo.first_said(conn, tenant_id, rest)
        item.valid_from, item.stated_at = redate(item.valid_from, item.stated_at, earliest)
        item.version += 1
        item.updated_at = now
        await repo.update_item(conn, item)
        why = f"session {sid} deleted: it no longer supports this"
        if item.valid_from != old_start and item.valid_from is not None:
            why += f"; first said {item.stated_at:%Y-%m-%d %H:%M} UTC by what remains"
        await versions.record(conn, item, "unsupport", ERASURE, why)
        await repo.forget_in_versions(conn, tenant_id, fid, session_id)
        if item.stated_at is not None and earliest is not None and item.stated_at == earliest:
            await repo.redate_versions(conn, tenant_id, fid, earliest)
        if item.valid_from != old_start and old_start is not None:
            await _moved_start(conn, tenant_id, item, old_start, facts, plan)
    for fid, (end, succ) in plan.restored.items():
        item = items[fid]
        item.invalid_at, item.superseded_by = end, succ
        item.version += 1
        item.updated_at = now
        await repo.update_item(conn, item)
        why = "true again" if succ is None else f"now replaced by fact {succ}"
        await versions.record(
            conn,
            item,
            "restore",
            ERASURE,
            f"the fact that replaced it went with session {sid}: {why}",
        )
    return len(plan.kept)


async def _moved_start(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    item: Fact,
    old_start: datetime,
    facts: Facts,
    plan: Release,
) -> None:
    """The facts `item` replaced at its old start now end at its new one."""
    for f in facts.all(await repo.replaced_by_any(conn, tenant_id, [item.id])):
        if f.id in plan.doomed or f.invalid_at != old_start or f.superseded_by != item.id:
            continue
        f.invalid_at = item.valid_from
        f.version += 1
        f.updated_at = datetime.now(UTC)
        await repo.update_item(conn, f)
        await versions.record(
            conn,
            f,
            "restore",
            ERASURE,
            f"the fact that replaced it, {item.id}, is now first said later: true until "
            f"{item.valid_from:%Y-%m-%d %H:%M} UTC",
        )

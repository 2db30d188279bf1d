"""A fact as one transaction works on it (`Fact`): a mutable copy of its row that the
batch's rules change and `app.facts.repository.update_item` stores, and the rules reading
a fact's times (no I/O)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime
from typing import Any

from app.knowledge.timeline import Said, is_older, said_of
from app.models.memory_item import MemoryItemRow


@dataclasses.dataclass(slots=True, eq=False)
class Fact:
    """A memory item's columns (`MemoryItemRow`'s fields, in its order), to change in
    place. Compared by identity: one object per row in a transaction (`Facts`)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    scope_kind: str
    scope_id: str
    kind: str
    source: str
    tags: list[str]
    importance: float
    text: str | None
    payload: Any
    token_cost: int
    created_at: datetime
    updated_at: datetime
    valid_from: datetime | None
    invalid_at: datetime | None
    superseded_by: uuid.UUID | None
    source_session_id: uuid.UUID | None
    source_seqs: list[int]
    version: int
    fact_key: str | None
    stated_at: datetime | None
    sources: list[dict[str, Any]]

    @classmethod
    def of(cls, row: MemoryItemRow) -> Fact:
        return cls(*row)


assert tuple(f.name for f in dataclasses.fields(Fact)) == MemoryItemRow._fields


class Facts:
    """The facts one transaction has read or written, one object per row: a row read again
    is the object already held (its changes are in the database as soon as made, so the
    two agree): an identity map, which `apply` relies on (it compares facts with `is`)."""

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[uuid.UUID, Fact] = {}

    def own(self, row: MemoryItemRow | Fact) -> Fact:
        held = self._by_id.get(row.id)
        if held is None:
            held = row if isinstance(row, Fact) else Fact.of(row)
            self._by_id[row.id] = held
        return held

    def all(self, rows: list[Any]) -> list[Fact]:
        return [self.own(r) for r in rows]


def older(valid_from: datetime, stated_at: datetime, target: Fact) -> bool:
    """A statement (true from `valid_from`, said at `stated_at`) older than `target`, like
    with like (`app.knowledge.timeline.is_older`)."""
    return is_older(
        Said(valid_from, stated_at),
        said_of(target.valid_from, target.stated_at, target.created_at),
    )


def same_text_loose(a: str | None, b: str | None) -> bool:
    return " ".join((a or "").lower().split()) == " ".join((b or "").lower().split())


MERGED = "a restatement of fact"  # the reason of a duplicate merged into its fact


def merged(f: Fact) -> bool:
    """A duplicate merged into another fact: it ended where it began."""
    return f.invalid_at is not None and f.valid_from is not None and f.invalid_at <= f.valid_from


def holding(facts: list[Fact], at: datetime) -> Fact | None:
    """The state of an attribute holding at `at` (began last on or before it, not ended)."""
    held = [
        f
        for f in facts
        if (f.valid_from or f.created_at) <= at
        and (f.invalid_at is None or at < f.invalid_at)
        and not merged(f)
    ]
    return max(held, key=lambda f: (f.valid_from or f.created_at, str(f.id))) if held else None


def when_text(t: datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M} UTC"


def said_in(session_id: uuid.UUID, seqs: list[int]) -> str:
    return f"session {session_id} msg {', '.join(map(str, seqs))}"

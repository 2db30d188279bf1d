"""Apply one batch's decisions in one transaction (the caller commits).

Operations run in candidate order, which is time order (`app.knowledge.timeline`). Each writes
the item and its version row (actor: extraction, the session's agent):

- add: a new fact, valid from its event time (else when it was said), with its
  provenance;
- invalidate: the target stops being true when the candidate became true, and the
  candidate is added as its successor; a candidate older than the target (like with
  like: `app.knowledge.timeline.is_older`) never overrides it: it is added as history,
  fitted into the timeline of the facts the target replaced (`fit_in_timeline`);
- update: the target is rewritten and takes effect from the candidate's time; an older
  candidate with the same text only adds its messages to the target's provenance
  (`confirm`), with another text it is history of its own (never support);
- confirm (a NONE naming the fact): the candidate's messages join the provenance.

The watermark check and advance (or a failed range's) are the caller's `commit_point`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.facts import metrics
from app.facts import repository as repo
from app.facts.policy import (
    FACT_KIND,
    FactOutputError,
    Operation,
    earlier_candidate,
    successions,
)
from app.knowledge import repository as items_repo
from app.knowledge import versions
from app.knowledge.scopes import Scope
from app.knowledge.service import enforce_max_items, token_cost
from app.knowledge.timeline import Said, fit_in_timeline, is_older, merge_sources, said_of
from app.models.memory_item import MemoryItem


class StaleFacts(Exception):
    """The watermark or a targeted fact moved between planning and applying."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A candidate fact with its times and where it was said."""

    text: str
    key: str | None
    importance: float
    tags: list[str]
    seqs: list[int]
    valid_from: datetime
    stated_at: datetime
    one_value: bool = False  # its key holds one value at a time (policy.holds_one_value)


@dataclasses.dataclass
class Proposal:
    """What one batch would change: candidates (time order) and their operations."""

    first_seq: int
    last_seq: int
    candidates: list[Candidate]
    operations: tuple[Operation, ...]
    unchanged: int = 0
    dropped: int = 0  # candidates of the answer dropped as irreparable (app.facts.repair)
    repaired: int = 0
    # restatements later in the batch: (candidate index, its restatement), each a `confirm`
    # of what that candidate became (issue 37: one batch records what ten would)
    restated: list[tuple[int, Candidate]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Applied:
    added: int = 0  # every new fact, successors and history included
    updated: int = 0
    invalidated: int = 0
    unchanged: int = 0
    history: int = 0  # older statements kept as history
    automatic: int = 0  # superseded by the one-value safety net (no decision named them)


CommitPoint = Callable[[AsyncSession], Awaitable[None]]


def _older(c: Candidate, target: MemoryItem) -> bool:
    """Like with like (`app.knowledge.timeline.is_older`)."""
    return is_older(
        Said(c.valid_from, c.stated_at),
        said_of(target.valid_from, target.stated_at, target.created_at),
    )


def _same_text(a: str | None, b: str | None) -> bool:
    return " ".join((a or "").lower().split()) == " ".join((b or "").lower().split())


def _when(t: datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M} UTC"


def _said(session_id: uuid.UUID, seqs: list[int]) -> str:
    return f"session {session_id} msg {', '.join(map(str, seqs))}"


class _Batch:
    def __init__(
        self,
        db: AsyncSession,
        tenant_id: uuid.UUID,
        session_id: uuid.UUID,
        scope: Scope,
        actor: versions.Actor,
    ) -> None:
        self.db, self.tenant_id, self.session_id = db, tenant_id, session_id
        self.scope, self.actor = scope, actor
        self.now = datetime.now(UTC)
        self.out = Applied()

    def source(self, c: Candidate) -> list[dict[str, Any]]:
        return [{"session_id": str(self.session_id), "seqs": sorted(set(c.seqs))}]

    async def write(self, item: MemoryItem, change: str, reason: str | None = None) -> None:
        await self.db.flush()
        await versions.record(self.db, item, change, self.actor, reason)

    async def bump(self, item: MemoryItem, change: str, reason: str) -> None:
        item.version += 1
        item.updated_at = self.now
        await self.write(item, change, reason)

    async def add(
        self,
        c: Candidate,
        *,
        invalid_at: datetime | None = None,
        superseded_by: uuid.UUID | None = None,
        reason: str | None = None,
    ) -> MemoryItem:
        text = c.text.strip()
        item = MemoryItem(
            id=uuid.uuid4(),
            tenant_id=self.tenant_id,
            scope_kind=self.scope.kind,
            scope_id=self.scope.storage_id,
            kind=FACT_KIND,
            source=f"session:{self.session_id}",
            tags=list(dict.fromkeys(c.tags)),
            importance=c.importance,
            text=text,
            payload=None,
            token_cost=token_cost(FACT_KIND, text, None),
            created_at=self.now,
            updated_at=self.now,
            valid_from=c.valid_from,
            invalid_at=invalid_at,
            superseded_by=superseded_by,
            source_session_id=self.session_id,
            source_seqs=sorted(set(c.seqs)),
            version=1,
            fact_key=c.key,
            stated_at=c.stated_at,
            sources=self.source(c),
        )
        self.db.add(item)
        await self.write(item, "add", reason or f"stated in {_said(self.session_id, c.seqs)}")
        self.out.added += 1
        return item

    async def invalidate(self, c: Candidate, target: MemoryItem) -> MemoryItem:
        if _older(c, target):
            return await self.history(c, target)
        item = await self.add(c)
        # a later statement whose event time is before the target's start (the target's
        # time was only when it was typed): the target never held (no negative validity)
        end = max(c.valid_from, target.valid_from or c.valid_from)
        target.invalid_at, target.superseded_by = end, item.id
        await self.bump(
            target,
            "invalidate",
            f"contradicted by {_said(self.session_id, c.seqs)}"
            f" (fact {item.id}, true from {_when(c.valid_from)})",
        )
        self.out.invalidated += 1
        return item

    async def history(self, c: Candidate, target: MemoryItem) -> MemoryItem:
        """An older statement of another value: a fact of its own, fitted into the
        timeline of the facts the target replaced (issue 37): true from its own time
        until the next one began, and the one holding then ends where it began."""
        chain = await repo.chain_of(self.db, self.tenant_id, target)
        by_id = {f.id: f for f in chain}
        slot = fit_in_timeline(
            c.valid_from,
            [(f.id, f.valid_from or f.created_at, f.invalid_at) for f in chain],
        )
        successor = by_id[slot.successor]
        item = await self.add(
            c,
            invalid_at=slot.until,
            superseded_by=successor.id,
            reason=(
                f"older than fact {successor.id} (true from {_when(slot.until)}): kept as history"
            ),
        )
        self.out.history += 1
        if slot.cut is not None:
            p = by_id[slot.cut]
            p.invalid_at, p.superseded_by = c.valid_from, item.id
            await self.bump(
                p,
                "invalidate",
                f"contradicted by {_said(self.session_id, c.seqs)}"
                f" (fact {item.id}, true from {_when(c.valid_from)})",
            )
            self.out.invalidated += 1
        return item

    async def update(self, c: Candidate, target: MemoryItem, text: str) -> MemoryItem:
        if _older(c, target):
            if _same_text(c.text, target.text):
                return await self.confirm(c, target, older=True)
            # an older statement of another value is never support of this one (issue
            # 37: "I work as a nurse" confirmed "I now teach"): it is history of its own
            return await self.history(c, target)
        text = text.strip()
        target.text, target.token_cost = text, token_cost(FACT_KIND, text, None)
        target.importance = c.importance
        target.tags = list(dict.fromkeys([*(target.tags or []), *c.tags]))
        target.fact_key = c.key or target.fact_key
        target.valid_from, target.stated_at = c.valid_from, c.stated_at
        target.source_session_id, target.source_seqs = self.session_id, sorted(set(c.seqs))
        target.sources = merge_sources(target.sources or [], self.source(c))
        await self.bump(target, "update", f"restated in {_said(self.session_id, c.seqs)}")
        self.out.updated += 1
        return target

    async def one_value(self, key: str) -> None:
        """The safety net of a key holding one value at a time (issue 37): when the
        model's decisions left two current facts of it, the later one supersedes the
        earlier, as an automatic `invalidate` saying why."""
        current = await repo.current_of_key(self.db, self.tenant_id, self.scope, key)
        by_id = {f.id: f for f in current}
        for older_id, newer_id in successions(
            [(f.id, f.valid_from or f.created_at, f.stated_at) for f in current]
        ):
            older, newer = by_id[older_id], by_id[newer_id]
            start = newer.valid_from or newer.created_at
            older.invalid_at, older.superseded_by = start, newer.id
            await self.bump(
                older,
                "invalidate",
                f"automatic: {key} holds one value at a time and fact {newer.id} (true "
                f"from {_when(start)}) is later; no decision named this fact",
            )
            self.out.invalidated += 1
            self.out.automatic += 1

    async def confirm(self, c: Candidate, target: MemoryItem, *, older: bool = False) -> MemoryItem:
        merged = merge_sources(target.sources or [], self.source(c))
        if merged == list(target.sources or []):
            return target
        target.sources = merged
        why = "an older statement of the same fact" if older else "said again"
        await self.bump(target, "confirm", f"{why}: {_said(self.session_id, c.seqs)}")
        return target


async def apply(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    scope: Scope,
    proposal: Proposal,
    commit_point: CommitPoint,
    *,
    actor: versions.Actor,
    max_items: int,
) -> Applied:
    """Write one batch's operations (module doc); `commit_point` first checks the
    watermark (raising `StaleFacts`) and moves it."""
    await commit_point(db)
    ops = proposal.operations
    if ops:
        await items_repo.lock_scope(db, tenant_id, scope)
    stored_ids = [
        uuid.UUID(o.target)
        for o in ops
        if o.target is not None and earlier_candidate(o.target, o.candidate) is None
    ]
    targets = await repo.lock_targets(db, tenant_id, stored_ids)
    for key in stored_ids:
        t = targets.get(key)
        if (
            t is None
            or t.invalid_at is not None
            or t.kind != FACT_KIND
            or (t.scope_kind, t.scope_id) != (scope.kind, scope.storage_id)
        ):
            raise StaleFacts(f"fact {key} changed meanwhile")
    batch = _Batch(db, tenant_id, session_id, scope, actor)
    batch.out.unchanged = proposal.unchanged
    # a stored fact targeted by several candidates: each applies to it as the one before
    # left it (an INVALIDATE hands it on to the fact that replaced it)
    current: dict[uuid.UUID, MemoryItem] = dict(targets)
    result: dict[int, MemoryItem] = {}  # candidate -> the fact it ended up as

    def resolve(o: Operation) -> MemoryItem:
        assert o.target is not None
        j = earlier_candidate(o.target, o.candidate)
        if j is None:
            return current[uuid.UUID(o.target)]
        if j not in result:
            raise FactOutputError(f"fact {o.candidate} names new-{j}, which was not stored")
        return result[j]

    def when(c: Candidate) -> tuple[datetime, datetime, int]:
        return (c.valid_from, c.stated_at, c.seqs[0])

    # operations and restatements in the order they were said (as ten batches would)
    steps: list[tuple[tuple[datetime, datetime, int], int, Operation | tuple[int, Candidate]]] = [
        (when(proposal.candidates[o.candidate]), 0, o) for o in ops
    ]
    steps += [(when(c), 1, (j, c)) for j, c in proposal.restated]
    steps.sort(key=lambda s: (s[0], s[1]))
    for _, _, step in steps:
        if isinstance(step, tuple):
            j, again = step
            if j in result:  # a NONE naming nothing left nothing to confirm
                result[j] = await batch.confirm(again, result[j])
            continue
        o = step
        c = proposal.candidates[o.candidate]
        if o.op == "add":
            result[o.candidate] = await batch.add(c)
            continue
        t = resolve(o)
        if o.op == "invalidate":
            item = await batch.invalidate(c, t)
            if item.superseded_by is None:  # the target was replaced: hand it on
                for sid, v in list(current.items()):
                    if v is t:
                        current[sid] = item
                for j, v in list(result.items()):
                    if v is t:
                        result[j] = item
            result[o.candidate] = item
        elif o.op == "update":
            result[o.candidate] = await batch.update(c, t, o.text or c.text)
        else:
            result[o.candidate] = await batch.confirm(c, t)
    one_value_keys = sorted(
        {c.key for c in proposal.candidates if c.one_value and c.key}
        | {c.key for _, c in proposal.restated if c.one_value and c.key}
    )
    for one_key in one_value_keys:
        await batch.one_value(one_key)
    if scope.kind == "project" and (batch.out.added or batch.out.invalidated):
        await enforce_max_items(db, tenant_id, scope, max_items)
    for op, n in (
        ("add", batch.out.added),
        ("update", batch.out.updated),
        ("invalidate", batch.out.invalidated),
    ):
        if n:
            metrics.OPERATIONS.labels(op=op).inc(n)
    return batch.out

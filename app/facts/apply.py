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

import asyncpg

from app.facts import metrics
from app.facts import repository as repo
from app.facts.item import MERGED, Fact, Facts, older, said_in, when_text
from app.facts.item import holding as _holding
from app.facts.item import merged as _merged
from app.facts.item import same_text_loose as _same_text
from app.facts.policy import (
    FACT_KIND,
    FactOutputError,
    Operation,
    earlier_candidate,
    may_alias,
    same_text,
)
from app.knowledge import repository as items_repo
from app.knowledge import versions
from app.knowledge.scopes import Scope
from app.knowledge.service import enforce_max_items, token_cost
from app.knowledge.timeline import fit_in_timeline, merge_sources


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
    # of what that candidate became (one batch records what ten would)
    restated: list[tuple[int, Candidate]] = dataclasses.field(default_factory=list)
    # key -> its attribute's canonical key, as the scope's history taught
    attrs: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Applied:
    added: int = 0  # every new fact, successors and history included
    updated: int = 0
    invalidated: int = 0
    unchanged: int = 0
    history: int = 0  # older statements kept as history
    automatic: int = 0  # superseded by the one-value safety net (no decision named them)


CommitPoint = Callable[[asyncpg.Connection], Awaitable[None]]


def _older(c: Candidate, target: Fact) -> bool:
    return older(c.valid_from, c.stated_at, target)  # like with like


class _Batch:
    def __init__(
        self,
        conn: asyncpg.Connection,
        tenant_id: uuid.UUID,
        session_id: uuid.UUID,
        scope: Scope,
        actor: versions.Actor,
        facts: Facts,
    ) -> None:
        self.conn, self.tenant_id, self.session_id = conn, tenant_id, session_id
        self.facts = facts
        self.scope, self.actor = scope, actor
        self.now = datetime.now(UTC)
        self.out = Applied()
        self.parent: dict[str, str] = {}

    # -- attributes: the keys naming one attribute, as taught so far and by
    # this batch's own decisions

    def learn(self, attrs: dict[str, str]) -> None:
        self.parent.update(attrs)

    def attribute(self, key: str | None) -> str | None:
        seen: set[str] = set()
        while key is not None and key in self.parent and key not in seen:
            seen.add(key)
            key = self.parent[key]
        return key

    def join(self, a: str | None, b: str | None) -> None:
        """A decision named a fact of key `a` for a candidate of key `b`: one attribute
        (never across subjects: `policy.may_alias`)."""
        if not may_alias(a, b):
            return
        ra, rb = self.attribute(a), self.attribute(b)
        if ra is not None and rb is not None and ra != rb:
            self.parent[rb] = ra

    def keys_of(self, key: str | None) -> list[str]:
        attr = self.attribute(key)
        if attr is None:
            return []
        return sorted({attr, *(k for k in self.parent if self.attribute(k) == attr)})

    def source(self, c: Candidate) -> list[dict[str, Any]]:
        return [{"session_id": str(self.session_id), "seqs": sorted(set(c.seqs))}]

    async def bump(self, item: Fact, change: str, reason: str) -> None:
        item.version += 1
        item.updated_at = self.now
        await repo.update_item(self.conn, item)
        await versions.record(self.conn, item, change, self.actor, reason)

    async def add(
        self,
        c: Candidate,
        *,
        invalid_at: datetime | None = None,
        superseded_by: uuid.UUID | None = None,
        reason: str | None = None,
    ) -> Fact:
        text = c.text.strip()
        item = Fact(
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
        await repo.insert_item(self.conn, item)
        self.facts.own(item)
        await versions.record(
            self.conn,
            item,
            "add",
            self.actor,
            reason or f"stated in {said_in(self.session_id, c.seqs)}",
        )
        self.out.added += 1
        return item

    async def invalidate(self, c: Candidate, target: Fact) -> Fact:
        self.join(target.fact_key, c.key)
        if same_text(c.text, target.text):  # a restatement is never a new value
            return await self.confirm(c, target, older=_older(c, target))
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
            f"contradicted by {said_in(self.session_id, c.seqs)}"
            f" (fact {item.id}, true from {when_text(c.valid_from)})",
        )
        self.out.invalidated += 1
        return item

    async def timeline_of(self, *facts: Fact, key: str | None = None) -> list[Fact]:
        """The whole history of the attribute of `facts` (and of `key`): every fact of its
        keys, valid or not, and the facts they replaced (a late statement was
        fitted among the current fact's `superseded_by` chain only)."""
        keys = sorted({k for f in facts for k in self.keys_of(f.fact_key)} | set(self.keys_of(key)))
        found = await repo.attribute_facts(self.conn, self.tenant_id, self.scope, keys)
        out = {f.id: f for f in self.facts.all(found)}
        for f in facts:
            for g in self.facts.all(await repo.chain_of(self.conn, self.tenant_id, f)):
                out.setdefault(g.id, g)
        # a restatement merged into another fact holds no time of its own
        return [f for f in out.values() if not _merged(f)]

    async def history(self, c: Candidate, target: Fact) -> Fact:
        """An older statement of another value: a fact of its own, placed in the whole
        history of its attribute: true from its own time until the next
        state began, and the state holding then ends where it began; when that state says
        the same, the statement is another source of it."""
        chain = await self.timeline_of(target, key=c.key)
        by_id = {f.id: f for f in chain}
        held = _holding(chain, c.valid_from)
        if held is not None and same_text(held.text, c.text):
            return await self.confirm(c, held, older=True)
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
                f"older than fact {successor.id} (true from {when_text(slot.until)}): "
                "kept as history"
            ),
        )
        self.out.history += 1
        if slot.cut is not None:
            p = by_id[slot.cut]
            p.invalid_at, p.superseded_by = c.valid_from, item.id
            await self.bump(
                p,
                "invalidate",
                f"contradicted by {said_in(self.session_id, c.seqs)}"
                f" (fact {item.id}, true from {when_text(c.valid_from)})",
            )
            self.out.invalidated += 1
        return item

    async def add_new(self, c: Candidate) -> Fact:
        """An ADD: a new fact, unless its attribute already holds it: a
        restatement of a current fact, or a late statement of the state that held then,
        is another source of that fact, never a second one."""
        facts = await self.timeline_of(key=c.key) if c.key else []
        same = [f for f in facts if f.invalid_at is None and same_text(f.text, c.text)]
        if not same and c.one_value:
            held = _holding(facts, c.valid_from)
            same = [held] if held is not None and same_text(held.text, c.text) else []
        if same:
            self.out.unchanged += 1
            return await self.confirm(c, same[0], older=_older(c, same[0]))
        return await self.add(c)

    async def update(self, c: Candidate, target: Fact, text: str) -> Fact:
        self.join(target.fact_key, c.key)
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
        target.fact_key = self.attribute(target.fact_key) or c.key or target.fact_key
        target.valid_from, target.stated_at = c.valid_from, c.stated_at
        target.source_session_id, target.source_seqs = self.session_id, sorted(set(c.seqs))
        target.sources = merge_sources(target.sources or [], self.source(c))
        await self.bump(target, "update", f"restated in {said_in(self.session_id, c.seqs)}")
        self.out.updated += 1
        return target

    async def one_value(self, key: str) -> None:
        """The safety net of an attribute holding one value at a time,
        over all its keys: when the decisions left two current facts of it, the one that
        became true last stays current; another saying the same is a restatement of it
        (merged: its sources join the earlier statement, and it holds no time of its
        own); any other is placed in the attribute's whole history (until the next state
        began, cutting the state that held when it began), an automatic `invalidate`
        saying why."""
        facts = await self.timeline_of(key=key)
        current = sorted(
            (f for f in facts if f.invalid_at is None),
            key=lambda f: (f.valid_from or f.created_at, f.stated_at or f.created_at, str(f.id)),
        )
        while len(current) > 1:
            newest = current[-1]
            twin = next((f for f in current[:-1] if same_text(f.text, newest.text)), None)
            if twin is not None:
                await self.merge(newest, twin)
                current.pop()
                continue
            f = current[-2]
            chain = [g for g in facts if g.id != f.id and not _merged(g)]
            slot = fit_in_timeline(
                f.valid_from or f.created_at,
                [(g.id, g.valid_from or g.created_at, g.invalid_at) for g in chain],
            )
            by_id = {g.id: g for g in chain}
            f.invalid_at, f.superseded_by = slot.until, slot.successor
            why = (
                f"automatic: {key} holds one value at a time and fact {slot.successor} "
                f"(true from {when_text(slot.until)}) is later; no decision named this fact"
            )
            if slot.successor != newest.id:
                why = (
                    f"automatic: {key} holds one value at a time; an older statement, "
                    f"placed in its history: true until fact {slot.successor} began "
                    f"({when_text(slot.until)}); no decision named this fact"
                )
            await self.bump(f, "invalidate", why)
            self.out.invalidated += 1
            self.out.automatic += 1
            if slot.successor != newest.id:
                self.out.history += 1
            if slot.cut is not None and slot.cut in by_id:
                p = by_id[slot.cut]
                start = f.valid_from or f.created_at
                if p.invalid_at is None or p.invalid_at > start:
                    p.invalid_at, p.superseded_by = start, f.id
                    await self.bump(
                        p,
                        "invalidate",
                        f"automatic: {key} holds one value at a time and fact {f.id} "
                        f"(true from {when_text(start)}) began while this held",
                    )
                    self.out.invalidated += 1
            current = sorted(
                (g for g in facts if g.invalid_at is None and not _merged(g)),
                key=lambda g: (
                    g.valid_from or g.created_at,
                    g.stated_at or g.created_at,
                    str(g.id),
                ),
            )

    async def merge(self, dup: Fact, into: Fact) -> None:
        """`dup` says what the current `into` says: its sources join `into` (a
        `confirm`), and it ends where it began, replaced by `into` (a duplicate
        is never a second current fact)."""
        merged = merge_sources(into.sources or [], dup.sources or [])
        if merged != list(into.sources or []):
            into.sources = merged
            await self.bump(into, "confirm", f"said again: fact {dup.id} says the same")
        start = dup.valid_from or dup.created_at
        dup.invalid_at, dup.superseded_by = start, into.id
        await self.bump(dup, "invalidate", f"{MERGED} {into.id}")
        self.out.unchanged += 1

    async def confirm(self, c: Candidate, target: Fact, *, older: bool = False) -> Fact:
        merged = merge_sources(target.sources or [], self.source(c))
        if merged == list(target.sources or []):
            return target
        target.sources = merged
        why = "an older statement of the same fact" if older else "said again"
        await self.bump(target, "confirm", f"{why}: {said_in(self.session_id, c.seqs)}")
        return target


async def apply(
    conn: asyncpg.Connection,
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
    await commit_point(conn)
    ops = proposal.operations
    if ops:
        await items_repo.lock_scope(conn, tenant_id, scope)
    stored_ids = [
        uuid.UUID(o.target)
        for o in ops
        if o.target is not None and earlier_candidate(o.target, o.candidate) is None
    ]
    facts = Facts()
    locked = await repo.lock_targets(conn, tenant_id, stored_ids)
    targets = {k: facts.own(r) for k, r in locked.items()}
    for key in stored_ids:
        t = targets.get(key)
        if (
            t is None
            or t.invalid_at is not None
            or t.kind != FACT_KIND
            or (t.scope_kind, t.scope_id) != (scope.kind, scope.storage_id)
        ):
            raise StaleFacts(f"fact {key} changed meanwhile")
    batch = _Batch(conn, tenant_id, session_id, scope, actor, facts)
    batch.learn(proposal.attrs)
    batch.out.unchanged = proposal.unchanged
    # a stored fact targeted by several candidates: each applies to it as the one before
    # left it (an INVALIDATE hands it on to the fact that replaced it)
    current: dict[uuid.UUID, Fact] = dict(targets)
    result: dict[int, Fact] = {}  # candidate -> the fact it ended up as

    def resolve(o: Operation) -> Fact:
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
            result[o.candidate] = await batch.add_new(c)
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
    one_value_attributes = sorted(
        {
            batch.attribute(c.key) or ""
            for c in [*proposal.candidates, *(c for _, c in proposal.restated)]
            if c.one_value and c.key
        }
        - {""}
    )
    for attribute in one_value_attributes:
        await batch.one_value(attribute)
    if scope.kind == "project" and (batch.out.added or batch.out.invalidated):
        await enforce_max_items(conn, tenant_id, scope, max_items)
    for op, n in (
        ("add", batch.out.added),
        ("update", batch.out.updated),
        ("invalidate", batch.out.invalidated),
    ):
        if n:
            metrics.OPERATIONS.labels(op=op).inc(n)
    return batch.out

"""Import of an export (`app.portability.format`) into the caller's tenant.

All or nothing per request: one transaction; the first bad line (malformed JSON, an unknown
kind, a missing key, a value the API would refuse (`app.portability.checks`), a value
PostgreSQL refuses, a missing end line) rolls everything back and is named in the error
with its field. Idempotent by ids, and an import never writes into what is already there:
a session, memory item or shared-memory entry whose key exists is left as it is, and so is
everything under it (a present session's state, summaries, snapshots, messages and
references; a present item's versions): those lines are counted as already present, and
nothing of them is written. Rows go in batches per kind, parents first (`format.ROWS`),
PostgreSQL turning the JSON into rows (`jsonb_populate_recordset`, so every column type
converts as it was exported); messages get their search vectors from the target tenant's
text search configuration, shared-memory entries a fresh version of this instance, and a
new session its message counters from the messages written.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from app.messages import prior as turn_prior
from app.models import metadata
from app.models.message import INDEXED_TEXT_SQL
from app.portability import checks
from app.portability import format as fmt

BATCH = 2000


def _insert_sql(kind: str, columns: list[str]) -> str:
    table = fmt.TABLE_OF[kind]
    names = ["tenant_id", *columns]
    values = ["$2::uuid", *(f"r.{c}" for c in columns)]
    if kind == "message":
        names.append("search_vector")
        values.append(
            "to_tsvector((SELECT t.text_search_config FROM tenants t "
            "WHERE t.id = $2::uuid)::regconfig, "
            + INDEXED_TEXT_SQL.format(text="coalesce(r.text, '')")
            + ")"
        )
    if kind == "shared_memory_entry":
        values = [
            ("nextval('shared_memory_version_seq')" if n == "version" else v)
            for n, v in zip(names, values, strict=True)
        ]
    return (
        f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(values)} "
        f"FROM jsonb_populate_recordset(NULL::{table}, $1::jsonb) r "
        f"ON CONFLICT DO NOTHING RETURNING {_RETURNING.get(kind, '1')}"
    )


# The kinds whose rows are parents of others: what their insert returns (the ids this
# import created), and, for each child kind, its parent kind and the key naming it.
_RETURNING = {"session": "id", "memory_item": "id"}
PARENT: dict[str, tuple[str, str]] = {
    "memory_state": ("session", "session_id"),
    "snapshot": ("session", "session_id"),
    "summary": ("session", "session_id"),
    "message": ("session", "session_id"),
    "reference": ("session", "session_id"),
    "memory_item_version": ("memory_item", "item_id"),
    # a session's own shared memory (namespace `session`, scoped by the session's id)
    "shared_memory_entry": ("session", "scope_id"),
}
_EXISTING = {
    "session": "SELECT id FROM sessions WHERE tenant_id = $1 AND id = ANY($2::uuid[])",
    "memory_item": "SELECT id FROM memory_items WHERE tenant_id = $1 AND id = ANY($2::uuid[])",
}
# a new session's counters follow from its messages
_COUNTERS = """
UPDATE sessions s SET last_seq = greatest(s.last_seq, m.last_seq),
                      message_tokens = m.tokens
FROM (SELECT session_id, max(seq) AS last_seq, sum(token_count) AS tokens
      FROM messages WHERE tenant_id = $1 AND session_id = ANY($2::uuid[])
      GROUP BY session_id) m
WHERE s.tenant_id = $1 AND s.id = m.session_id
"""


@dataclass
class Importer:
    conn: asyncpg.Connection
    tenant_id: uuid.UUID
    limits: checks.Limits
    pending: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    size: int = 0
    next_flush: int = BATCH
    inserted: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    # parents (sessions, memory items) this import wrote: only their children are written
    created: dict[str, set[uuid.UUID]] = field(default_factory=dict)
    # each session's last message imported so far: (seq, what its next one's prior reads)
    last_message: dict[str, tuple[int, turn_prior.Before]] = field(default_factory=dict)

    def add(self, line: int, kind: str, obj: dict[str, Any]) -> None:
        table = fmt.TABLE_OF[kind]
        allowed = metadata.tables[table].c
        unknown = [k for k in obj if k not in allowed or k in fmt.skipped(table)]
        if unknown:
            raise fmt.FormatError(line, f"{kind} with unknown field {unknown[0]!r}", unknown[0])
        try:
            checks.check(kind, obj, self.limits)
        except checks.Refused as exc:
            raise fmt.FormatError(line, f"{kind} {exc.field}: {exc.reason}", exc.field) from exc
        self.pending.setdefault(kind, []).append((line, obj))
        self.size += 1

    async def flush(self, final: bool = False) -> None:
        """Write what is pending, parents first. Before the end (`final` false), a row whose
        parent is neither written yet nor already in the tenant waits for a later flush:
        the file may give it before its parent (an export of ours never does, an edited or
        generated one may), and the import reads it whole before it judges."""
        waiting: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for kind in fmt.KINDS:
            rows = self.pending.pop(kind, [])
            if rows:
                held = await self._insert(kind, rows, final)
                if held:
                    waiting[kind] = held
        self.pending = waiting
        self.size = sum(len(rows) for rows in waiting.values())
        # what waits is read again on every flush: flush less often as it grows
        self.next_flush = self.size + BATCH

    async def _insert(
        self, kind: str, rows: list[tuple[int, dict[str, Any]]], final: bool
    ) -> list[tuple[int, dict[str, Any]]]:
        """Insert `rows`; returns the rows that wait for their parent."""
        held: list[tuple[int, dict[str, Any]]] = []
        if kind in PARENT:
            rows, held = await self._under_new_parents(kind, rows, final)
            if not rows:
                return held
        if kind == "message":
            self._priors(rows)
        columns = sorted({k for _, obj in rows for k in obj})
        sql = _insert_sql(kind, columns)
        try:
            async with self.conn.transaction():  # a savepoint: a failure is then traced
                done = await self.conn.fetch(sql, json.dumps([o for _, o in rows]), self.tenant_id)
        except asyncpg.PostgresError:
            await self._trace(sql, rows)
            raise
        n = len(done)
        if kind in _RETURNING:
            self.created.setdefault(kind, set()).update(r[0] for r in done)
        self.inserted[kind] = self.inserted.get(kind, 0) + n
        self.skipped[kind] = self.skipped.get(kind, 0) + len(rows) - n
        return held

    def _priors(self, rows: list[tuple[int, dict[str, Any]]]) -> None:
        """Each message's prior and time flag (`app.messages.prior`), as the append
        stores them: a message after the one before it in its session, in this batch or
        an earlier one of this import (an import writes whole new sessions)."""
        keyed = []
        for _, obj in rows:
            seq = obj.get("seq")
            keyed.append((str(obj.get("session_id")), seq if isinstance(seq, int) else 0, obj))
        keyed.sort(key=lambda k: (k[0], k[1]))
        for session, seq, obj in keyed:
            text = obj.get("text")
            text = text if isinstance(text, str) else ""
            role = str(obj.get("role"))
            last = self.last_message.get(session)
            before = last[1] if last is not None and last[0] == seq - 1 else None
            obj["prior"] = turn_prior.prior_of(text, role, before)
            obj["timed"] = turn_prior.timed(text)
            self.last_message[session] = (seq, turn_prior.Before(role, turn_prior.asks(text)))

    async def _under_new_parents(
        self, kind: str, rows: list[tuple[int, dict[str, Any]]], final: bool
    ) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, dict[str, Any]]]]:
        """(the rows to write, the rows that wait). A row under a parent this import wrote
        is written; one under a parent that was already there is counted as present and
        left out. One naming a parent that is nowhere yet waits, until the last flush,
        where it stays in for the database to refuse (the error names its line)."""
        parent, key = PARENT[kind]
        new = self.created.get(parent, set())
        owner = {line: _parent_id(kind, obj, key) for line, obj in rows}
        others = {p for p in owner.values() if p is not None} - new
        present: set[uuid.UUID] = set()
        if others:
            found = await self.conn.fetch(_EXISTING[parent], self.tenant_id, list(others))
            present = {r[0] for r in found}
        kept = [(line, obj) for line, obj in rows if owner[line] not in present]
        if len(kept) < len(rows):
            self.skipped[kind] = self.skipped.get(kind, 0) + len(rows) - len(kept)
        if final:
            return kept, []
        ready: list[tuple[int, dict[str, Any]]] = []
        held: list[tuple[int, dict[str, Any]]] = []
        for line, obj in kept:
            (ready if owner[line] is None or owner[line] in new else held).append((line, obj))
        return ready, held

    async def finish(self) -> None:
        """A new session's counters, from the messages this import wrote."""
        sessions = list(self.created.get("session", ()))
        if sessions:
            await self.conn.execute(_COUNTERS, self.tenant_id, sessions)

    async def _trace(self, sql: str, rows: list[tuple[int, dict[str, Any]]]) -> None:
        """Name the first line of a failed batch that PostgreSQL refuses on its own."""
        for line, obj in rows:
            try:
                async with self.conn.transaction():
                    await self.conn.fetch(sql, json.dumps([obj]), self.tenant_id)
                    raise _Undo()
            except _Undo:
                continue
            except asyncpg.PostgresError as exc:
                raise fmt.FormatError(line, _reason(exc)) from exc


def _parent_id(kind: str, obj: dict[str, Any], key: str) -> uuid.UUID | None:
    if kind == "shared_memory_entry" and obj.get("namespace") != "session":
        return None
    try:
        return uuid.UUID(str(obj[key]))
    except ValueError:
        return None  # not a session's scope: nothing of a session to protect


class _Undo(Exception):
    """Rolls a probe back."""


def _reason(exc: asyncpg.PostgresError) -> str:
    state = getattr(exc, "sqlstate", "")
    if state == "23503":
        return "it names a row that is neither in the import nor in this tenant"
    if state in ("LM404", "LM409"):
        return "its subject is being erased here"
    msg = str(getattr(exc, "message", "") or exc).split("\n", 1)[0]
    return f"refused by the database: {msg[:300]}"


async def lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    buf = b""
    async for chunk in chunks:
        buf += chunk
        *whole, buf = buf.split(b"\n")
        for w in whole:
            yield w
    if buf:
        yield buf


async def run(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    chunks: AsyncIterator[bytes],
    limits: checks.Limits,
) -> tuple[dict[str, int], dict[str, int]]:
    """Import everything or nothing (the caller holds the transaction); returns
    (inserted, already there) per kind."""
    reader = fmt.Reader()
    importer = Importer(conn, tenant_id, limits)
    async for raw in lines(chunks):
        try:
            got = reader.feed(raw)
        except UnicodeDecodeError as exc:
            raise fmt.FormatError(reader.line, "not UTF-8") from exc
        if got is not None:
            importer.add(reader.line, *got)
            if importer.size >= importer.next_flush:
                await importer.flush()
    reader.finish()
    await importer.flush(final=True)
    await importer.finish()
    return importer.inserted, importer.skipped

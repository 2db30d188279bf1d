"""Import of an export (`app.portability.format`) into the caller's tenant.

All or nothing: one transaction; the first bad line (malformed JSON, an unknown kind, a
missing key, a value PostgreSQL refuses, a missing end line) rolls everything back and is
named in the error. Idempotent by ids: a row whose key is already there is left as it is
(`ON CONFLICT DO NOTHING`), so importing twice adds nothing. Rows go in batches per kind,
parents first (`format.ROWS`), PostgreSQL turning the JSON into rows
(`jsonb_populate_recordset`, so every column type converts as it was exported); messages
get their search vectors from the target tenant's text search configuration, shared-memory
entries a fresh version of this instance.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from app.models import metadata
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
            "WHERE t.id = $2::uuid)::regconfig, coalesce(r.text, ''))"
        )
    if kind == "shared_memory_entry":
        values = [
            ("nextval('shared_memory_version_seq')" if n == "version" else v)
            for n, v in zip(names, values, strict=True)
        ]
    return (
        f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(values)} "
        f"FROM jsonb_populate_recordset(NULL::{table}, $1::jsonb) r "
        f"ON CONFLICT DO NOTHING RETURNING 1"
    )


@dataclass
class Importer:
    conn: asyncpg.Connection
    tenant_id: uuid.UUID
    pending: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    size: int = 0
    inserted: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, line: int, kind: str, obj: dict[str, Any]) -> None:
        table = fmt.TABLE_OF[kind]
        allowed = metadata.tables[table].c
        unknown = [k for k in obj if k not in allowed or k in fmt.skipped(table)]
        if unknown:
            raise fmt.FormatError(line, f"{kind} with unknown field {unknown[0]!r}")
        self.pending.setdefault(kind, []).append((line, obj))
        self.size += 1

    async def flush(self) -> None:
        for kind in fmt.KINDS:
            rows = self.pending.pop(kind, [])
            if rows:
                await self._insert(kind, rows)
        self.size = 0

    async def _insert(self, kind: str, rows: list[tuple[int, dict[str, Any]]]) -> None:
        columns = sorted({k for _, obj in rows for k in obj})
        sql = _insert_sql(kind, columns)
        try:
            async with self.conn.transaction():  # a savepoint: a failure is then traced
                done = await self.conn.fetch(sql, json.dumps([o for _, o in rows]), self.tenant_id)
        except asyncpg.PostgresError:
            await self._trace(sql, rows)
            raise
        n = len(done)
        self.inserted[kind] = self.inserted.get(kind, 0) + n
        self.skipped[kind] = self.skipped.get(kind, 0) + len(rows) - n

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
    conn: asyncpg.Connection, tenant_id: uuid.UUID, chunks: AsyncIterator[bytes]
) -> tuple[dict[str, int], dict[str, int]]:
    """Import everything or nothing (the caller holds the transaction); returns
    (inserted, already there) per kind."""
    reader = fmt.Reader()
    importer = Importer(conn, tenant_id)
    async for raw in lines(chunks):
        try:
            got = reader.feed(raw)
        except UnicodeDecodeError as exc:
            raise fmt.FormatError(reader.line, "not UTF-8") from exc
        if got is not None:
            importer.add(reader.line, *got)
            if importer.size >= BATCH:
                await importer.flush()
    reader.finish()
    await importer.flush()
    return importer.inserted, importer.skipped

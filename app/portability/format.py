"""The NDJSON export format, version 1 (pure: no I/O).

One JSON object per line, `"t"` naming its kind:

    {"t": "header", "format": "loom-export", "version": 1, "scope": {...}, "exported_at": ...}
    {"t": "session", ...}             every column of the session (not its tenant)
    {"t": "memory_state", ...}        its segmented-memory state (ROM, Kernel, L1 start...)
    {"t": "message", ...}             messages with their original seqs and timestamps
    {"t": "snapshot", ...} {"t": "summary", ...}
    {"t": "shared_memory_entry", ...} the session's shared-memory scope (value as bytea hex)
    {"t": "reference", ...}           which message holds which of those entries
    {"t": "memory_item", ...} {"t": "memory_item_version", ...}   facts and other items
    {"t": "end", "counts": {kind: lines}}
    {"t": "error", "code": ..., "message": ...}   instead of the end: the export was cut
                                                  short (the database failed mid-stream)

Columns are the table's own (`ROWS`: kind -> table; the column lists come from the table
models, so a column a later migration adds travels without a change here), minus the
tenant, derived columns (search vectors) and erasure state. Parents come before their
rows. The `end` line makes a truncated file detectable: an import without it, or whose
counts differ from the lines read, is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.core import jsonlimits

FORMAT = "loom-export"
VERSION = 1

# kind -> table, in the order an export writes them and an import inserts them
ROWS: tuple[tuple[str, str], ...] = (
    ("session", "sessions"),
    ("memory_state", "memory_states"),
    ("snapshot", "memory_snapshots"),
    ("summary", "memory_summaries"),
    ("message", "messages"),
    ("shared_memory_entry", "shared_memory_entries"),
    ("reference", "shared_memory_ref_holders"),
    ("memory_item", "memory_items"),
    ("memory_item_version", "memory_item_versions"),
)
TABLE_OF: dict[str, str] = dict(ROWS)
KINDS: tuple[str, ...] = tuple(k for k, _ in ROWS)
# Columns never exported: the tenant (an import takes the caller's), derived ones, and
# state that belongs to this instance.
SKIPPED_COLUMNS: dict[str, frozenset[str]] = {
    "sessions": frozenset({"tenant_id", "erasure_id"}),
    "messages": frozenset({"tenant_id", "search_vector", "search_length", "prior", "timed"}),
}
DEFAULT_SKIPPED = frozenset({"tenant_id"})
# The keys a line of each kind must carry (the rest may be left to the column defaults).
REQUIRED: dict[str, tuple[str, ...]] = {
    "session": ("id", "agent_id"),
    "memory_state": ("session_id",),
    "snapshot": ("id", "session_id"),
    "summary": ("id", "session_id"),
    "message": ("session_id", "seq", "role"),
    "shared_memory_entry": ("id", "namespace", "storage_key", "ref_id", "value"),
    "reference": ("entry_id", "session_id", "seq"),
    "memory_item": ("id", "scope_kind", "kind"),
    "memory_item_version": ("item_id", "version"),
}


class FormatError(ValueError):
    """A line that cannot be imported; `line` is 1-based."""

    def __init__(self, line: int, message: str, field: str | None = None) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.reason = message
        self.field = field


def skipped(table: str) -> frozenset[str]:
    return SKIPPED_COLUMNS.get(table, DEFAULT_SKIPPED)


def header_line(scope: dict[str, Any], exported_at: str) -> str:
    return json.dumps(
        {
            "t": "header",
            "format": FORMAT,
            "version": VERSION,
            "scope": scope,
            "exported_at": exported_at,
        },
        separators=(",", ":"),
    )


def error_line(unavailable: bool) -> str:
    """The last line of an export cut short (`unavailable`: the database failed
    mid-stream): not an end line, so an import refuses the file as truncated; a reader
    sees why."""
    return json.dumps(
        {
            "t": "error",
            "code": "database_unavailable" if unavailable else "internal_error",
            "message": "The export was cut short"
            + (" (the database is unavailable)" if unavailable else "")
            + "; this file is incomplete: export again.",
        },
        separators=(",", ":"),
    )


def end_line(counts: dict[str, int]) -> str:
    return json.dumps({"t": "end", "counts": counts}, separators=(",", ":"))


@dataclass
class Reader:
    """Checks lines in order: a header first, known kinds with their keys, an end last
    whose counts match. `feed` returns (kind, object) for a data line, None otherwise."""

    line: int = 0
    seen_header: bool = False
    ended: bool = False
    counts: dict[str, int] = field(default_factory=dict)

    def feed(self, raw: bytes | str) -> tuple[str, dict[str, Any]] | None:
        self.line += 1
        text = raw.decode("utf-8", "strict") if isinstance(raw, bytes) else raw
        if not text.strip():
            return None
        if self.ended:
            raise FormatError(self.line, "a line after the end line")
        if jsonlimits.text_depth(text) > jsonlimits.max_depth():
            raise FormatError(
                self.line, f"JSON is nested deeper than {jsonlimits.max_depth()} levels"
            )
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(self.line, f"not JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise FormatError(self.line, "nested too deeply") from exc
        if not isinstance(obj, dict) or not isinstance(obj.get("t"), str):
            raise FormatError(self.line, 'not an object with a "t" kind')
        kind = obj.pop("t")
        if not self.seen_header:
            if kind != "header" or obj.get("format") != FORMAT:
                raise FormatError(self.line, f'the first line must be the "{FORMAT}" header')
            if obj.get("version") != VERSION:
                raise FormatError(self.line, f"unsupported version {obj.get('version')!r}")
            self.seen_header = True
            return None
        if kind == "end":
            expected = obj.get("counts")
            if not isinstance(expected, dict) or {k: v for k, v in expected.items() if v} != {
                k: v for k, v in self.counts.items() if v
            }:
                raise FormatError(
                    self.line,
                    "the end line's counts differ from the lines "
                    "read (a truncated or edited export)",
                )
            self.ended = True
            return None
        if kind not in TABLE_OF:
            raise FormatError(self.line, f"unknown kind {kind!r}")
        missing = [k for k in REQUIRED[kind] if obj.get(k) is None]
        if missing:
            raise FormatError(self.line, f"{kind} without {', '.join(missing)}")
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return kind, obj

    def finish(self) -> None:
        if not self.seen_header:
            raise FormatError(max(1, self.line), "empty: no header line")
        if not self.ended:
            raise FormatError(self.line + 1, "the export is truncated (no end line)")

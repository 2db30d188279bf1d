"""What an imported line may hold (pure: no I/O).

An import stores rows the API would otherwise have written, so each line passes the rules
the API applies when it creates the same object, through the API's own definitions:

- every column by its type in the table model (`app.models`): a time is an RFC 3339
  date-time with a timezone in years 2-9998 (`JsonAwareDatetime`, as request bodies), an
  integer a JSON integer that is not negative and fits its column, a number finite, a flag
  a boolean, an id a UUID, text within its column's length;
- a session through `SessionCreate` (agent and user id patterns, `SessionConfig` with its
  cross-field rules, metadata an object);
- a message through `MessageIn` and `canonicalise` (the append's shapes: role, content,
  tool calls, tool results), the append's size and `created_at` checks, with its search
  text and token count computed again as the append computes them;
- a memory item through `MemoryItemCreate` (scope, kind, tags, importance, text), with
  its token cost computed again;
- a shared-memory entry through the namespace, scope and key rules, its bytes agreeing
  with its size (and unpacking when compressed);
- a memory state, summary or snapshot holding positions (seqs) that are positions.

Counters that follow from other rows (a session's `last_seq` and `message_tokens`) are not
trusted: the importer computes them from the messages it wrote. A refused line names its
field (`Refused.field`).
"""

from __future__ import annotations

import gzip
import math
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from app.core import storable
from app.core.errors import AppError
from app.core.strict import JsonAwareDatetime
from app.core.tokens import count_text
from app.knowledge.schemas import MemoryItemCreate
from app.knowledge.service import token_cost
from app.memory.layers import SCHEMA_CACHE_SIZE, kernel_tokens, rom_text
from app.memory.schemas import RomInput, ToolDefinition
from app.messages.canonical import MessageShapeError, canonicalise
from app.messages.schemas import MessageIn, MessagesAppend
from app.messages.service import check_created_at, check_sizes
from app.models import metadata
from app.models.base import utcnow
from app.portability import format as fmt
from app.session_resource.schemas import SessionCreate
from app.shared_memory import errors as sm_errors
from app.shared_memory import keys as sm_keys
from app.shared_memory import refs as sm_refs

_INT_MAX = {sa.Integer: 2**31 - 1, sa.BigInteger: 2**63 - 1, sa.SmallInteger: 2**15 - 1}
_TIME = TypeAdapter(JsonAwareDatetime)


class Refused(ValueError):
    """A line the API would not have written; `field` names the offending column."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _first_error(exc: ValidationError, prefix: str = "") -> Refused:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    field = ".".join(p for p in (prefix, loc) if p) or prefix or "line"
    return Refused(field, str(err["msg"]))


# --- columns, by their type in the table model ------------------------------------------


def _column_check(column: sa.Column) -> Callable[[Any], Any]:
    kind = type(column.type)
    nullable = bool(column.nullable)
    length = getattr(column.type, "length", None)

    def check(value: Any) -> Any:
        if value is None:
            if nullable or column.server_default is not None:
                return value
            raise ValueError("must not be null")
        if isinstance(column.type, sa.DateTime):
            try:
                parsed = _TIME.validate_python(value)
            except ValidationError as exc:
                raise ValueError(str(exc.errors()[0]["msg"])) from exc
            return parsed.isoformat()  # in UTC, as the API stores it (`app.core.storable`)
        if kind in _INT_MAX:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError("must be an integer")
            if not 0 <= value <= _INT_MAX[kind]:
                raise ValueError(f"must be between 0 and {_INT_MAX[kind]}")
            return value
        if isinstance(column.type, sa.Float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError("must be a number")
            if not math.isfinite(value):
                raise ValueError("must be finite")
            return value
        if isinstance(column.type, sa.Boolean):
            if not isinstance(value, bool):
                raise ValueError("must be true or false")
            return value
        if isinstance(column.type, sa.Uuid):
            if not isinstance(value, str):
                raise ValueError("must be a UUID")
            uuid.UUID(value)  # ValueError names it
            return value
        if isinstance(column.type, sa.String):  # Text is a String
            if not isinstance(value, str):
                raise ValueError("must be a string")
            if length is not None and len(value) > length:
                raise ValueError(f"is longer than {length} characters")
            return value
        if isinstance(column.type, sa.LargeBinary):
            if not isinstance(value, str) or not value.startswith("\\x"):
                raise ValueError('must be bytes as PostgreSQL writes them ("\\\\x" and hex)')
            bytes.fromhex(value[2:])
            return value
        if isinstance(column.type, sa.ARRAY):
            if not isinstance(value, list):
                raise ValueError("must be a list")
            return value
        return value  # JSON: its depth is checked on the line's text

    return check


@cache
def _columns(table: str) -> dict[str, Callable[[Any], Any]]:
    return {c.name: _column_check(c) for c in metadata.tables[table].c}


def _typed(kind: str, obj: dict[str, Any]) -> None:
    checks = _columns(fmt.TABLE_OF[kind])
    for name, value in obj.items():
        found = storable.problem(value)
        if found is not None:
            where = ".".join(str(p) for p in (name, *found.loc))
            raise Refused(where, found.reason)
        try:
            obj[name] = checks[name](value)
        except (ValueError, TypeError) as exc:
            raise Refused(name, str(exc) or "is not valid here") from exc
    for name in _SEQ_COLUMNS.get(kind, ()):
        if name in obj and obj[name] is not None:
            reason = storable.seq_problem(obj[name])
            if reason is not None:
                raise Refused(name, reason)


# the columns holding a message's position (`storable.MAX_SEQ` bounds each)
_SEQ_COLUMNS: dict[str, tuple[str, ...]] = {
    "message": ("seq",),
    "memory_state": ("l1_start_seq",),
    "snapshot": ("start_seq", "end_seq"),
    "summary": ("start_seq", "end_seq"),
    "reference": ("seq",),
}


# --- each kind by the rules of the route that creates it --------------------------------


def _validate(model: type[BaseModel], data: dict[str, Any], prefix: str = "") -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _first_error(exc, prefix) from exc


_SESSION_FIELDS = tuple(
    name for name in SessionCreate.model_fields if name in metadata.tables["sessions"].c
)


def _session(obj: dict[str, Any], now: datetime, limits: Limits) -> None:
    # every field of the create body that a session line carries (its columns: the ROM
    # lives in the memory state's line), so a field added to both is checked here too
    body: dict[str, Any] = {k: obj[k] for k in _SESSION_FIELDS if obj.get(k) is not None}
    created = _validate(SessionCreate, body)
    assert isinstance(created, SessionCreate)
    if "config" in obj:
        obj["config"] = created.config.model_dump()
    # counters that follow from the messages: the importer computes them
    obj.pop("last_seq", None)
    obj.pop("message_tokens", None)


def _message(obj: dict[str, Any], now: datetime, limits: Limits) -> None:
    given = {
        "role": obj.get("role"),
        "content": obj.get("content"),
        "tool_calls": obj.get("tool_calls"),
        "tool_use_id": obj.get("tool_use_id"),
        "is_error": obj.get("is_error", False),
        "name": obj.get("name"),
        "metadata": obj.get("metadata"),
        "created_at": obj.get("created_at"),
    }
    message = _validate(MessageIn, {k: v for k, v in given.items() if v is not None})
    assert isinstance(message, MessageIn)
    body = MessagesAppend(messages=[message])
    try:
        check_sizes(body, limits.max_message_bytes)
        check_created_at(body, now)
        canonical = canonicalise(message.model_dump(exclude_none=True), 0)
    except AppError as exc:
        raise Refused(_detail_field(exc, "content"), exc.message) from exc
    except MessageShapeError as exc:
        field = ".".join(str(p) for p in exc.loc[3:]) or "content"
        raise Refused(field, str(exc)) from exc
    if len(canonical) != 1 or canonical[0].role != message.role:
        raise Refused(
            "content", "one line is one stored message: a tool result is its own tool message"
        )
    c = canonical[0]
    text, tokens = c.text_and_tokens()
    obj.update(
        role=c.role,
        content=c.content,
        tool_calls=c.tool_calls,
        tool_use_id=c.tool_use_id,
        is_error=c.is_error,
        name=c.name,
        metadata=c.metadata,
        text=text,
        token_count=tokens,
    )


def _detail_field(exc: AppError, default: str) -> str:
    details = exc.details
    if isinstance(details, list) and details and isinstance(details[0], dict):
        loc = details[0].get("loc") or []
        tail = [str(p) for p in loc[3:]]
        if tail:
            return ".".join(tail)
    return default


def _memory_state(obj: dict[str, Any], now: datetime, limits: Limits) -> None:
    rom = obj.get("rom")
    if rom is not None:
        if not isinstance(rom, dict):
            raise Refused("rom", "must be an object")
        version = rom.get("profile_version")
        if version is not None and (
            isinstance(version, bool) or not isinstance(version, int) or version < 1
        ):
            raise Refused("rom.profile_version", "must be a profile version (1 or more) or null")
        inline = {k: v for k, v in rom.items() if k != "profile_version"}
        _validate(RomInput, {"system_prompt": "", **inline}, "rom")
        obj["rom_text"] = rom_text(rom)
        obj["rom_tokens"] = count_text(obj["rom_text"])
    kernel = obj.get("kernel")
    if kernel is not None:
        _validate(KernelDocument, kernel, "kernel")
        obj["kernel_tokens"] = kernel_tokens(kernel)
    _at_least_one(obj, "l1_start_seq")
    _seqs(obj, "promoted_seqs")


class _CachedSchema(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    schema_: Any = Field(alias="schema")


class KernelDocument(BaseModel):
    """A stored Kernel (`app.memory.layers`): the tools the kernel route accepts, the
    cached schemas, the latest large-result reference."""

    model_config = ConfigDict(extra="forbid")

    tools: list[ToolDefinition] = Field(default_factory=list)
    schemas: list[_CachedSchema] = Field(default_factory=list, max_length=SCHEMA_CACHE_SIZE)
    large_result_ref: dict[str, Any] | None = None


def _span(obj: dict[str, Any], now: datetime, limits: Limits) -> None:
    start, end = obj.get("start_seq"), obj.get("end_seq")
    if isinstance(start, int) and isinstance(end, int) and not 1 <= start <= end:
        raise Refused("start_seq", "must be at least 1 and at most end_seq")
    if "text" in obj and "token_count" not in obj:
        raise Refused("token_count", "is required with text")


def _reference(obj: dict[str, Any], now: datetime, limits: Limits) -> None:
    _at_least_one(obj, "seq", default=0)


def _entry(obj: dict[str, Any], now: datetime, limits: Limits) -> None:
    try:
        namespace = sm_keys.Namespace(str(obj.get("namespace")))
    except ValueError as exc:
        raise Refused("namespace", f"unknown namespace {obj.get('namespace')!r}") from exc
    scope = obj.get("scope_id") or ""
    try:
        if scope:
            sm_keys.validate_scope_id(scope)
        key = sm_keys.public_key(namespace, scope, obj["storage_key"])
        sm_keys.validate_key(key)
    except (ValueError, sm_errors.InvalidKey, sm_errors.InvalidScope) as exc:
        raise Refused("storage_key", str(exc)) from exc
    if not sm_refs.is_ref_id(str(obj["ref_id"])):
        raise Refused("ref_id", "must be a reference id (ref_ and 16 hex digits)")
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise Refused("metadata", "must be an object")
    raw = bytes.fromhex(obj["value"][2:])
    if obj.get("compressed"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise Refused("value", "is marked compressed but is not gzip") from exc
    if "size_bytes" in obj and obj["size_bytes"] != len(raw):
        raise Refused("size_bytes", f"says {obj['size_bytes']} but the value has {len(raw)}")
    if "stored_bytes" in obj:
        obj["stored_bytes"] = len(obj["value"]) // 2 - 1


def _item(obj: dict[str, Any], now: datetime, limits: Limits) -> None:
    scope_kind, scope_id = obj.get("scope_kind"), obj.get("scope_id")
    scope = f"{scope_kind}/{scope_id}" if scope_id else str(scope_kind)
    body = {
        "scope": scope,
        "kind": obj.get("kind"),
        "source": obj.get("source"),
        "tags": obj.get("tags", []),
        "importance": obj.get("importance", 0.5),
        "text": obj.get("text"),
        "payload": obj.get("payload"),
    }
    item = _validate(MemoryItemCreate, {k: v for k, v in body.items() if v is not None})
    assert isinstance(item, MemoryItemCreate)
    if item.text is None and item.payload is None:
        raise Refused("text", "an item needs text or a payload")
    _provenance(obj)
    obj["token_cost"] = token_cost(item.kind, item.text, item.payload)


def _item_version(obj: dict[str, Any], now: datetime, limits: Limits) -> None:
    _provenance(obj)
    tags = obj.get("tags", [])
    if not isinstance(tags, list) or any(not isinstance(t, str) for t in tags):
        raise Refused("tags", "must be a list of strings")


def _at_least_one(obj: dict[str, Any], name: str, default: int = 1) -> None:
    if obj.get(name, default) < 1:  # the column's type is checked already (`_typed`)
        raise Refused(name, "must be at least 1")


def _seqs(obj: dict[str, Any], name: str) -> None:
    seqs = obj.get(name, [])
    if not isinstance(seqs, list) or any(storable.seq_problem(s) is not None for s in seqs):
        raise Refused(name, f"must be a list of seqs (integers from 1 to {storable.MAX_SEQ})")


def _provenance(obj: dict[str, Any]) -> None:
    """A fact's (an item's or a version's) version number, source seqs and sources."""
    _at_least_one(obj, "version")
    _seqs(obj, "source_seqs")
    sources = obj.get("sources", [])
    if not isinstance(sources, list) or any(not isinstance(s, dict) for s in sources):
        raise Refused("sources", "must be a list of objects")


@dataclass(frozen=True)
class Limits:
    """The request limits an import shares with the routes (from the settings)."""

    max_message_bytes: int


_RULES: dict[str, Callable[[dict[str, Any], datetime, Limits], None]] = {
    "session": _session,
    "memory_state": _memory_state,
    "snapshot": _span,
    "summary": _span,
    "message": _message,
    "shared_memory_entry": _entry,
    "reference": _reference,
    "memory_item": _item,
    "memory_item_version": _item_version,
}


def check(kind: str, obj: dict[str, Any], limits: Limits, now: datetime | None = None) -> None:
    """Refuse (`Refused`) a line the API would not have written; fix up in place what the
    API derives (search text, token counts and costs, normalised config)."""
    _typed(kind, obj)
    _RULES[kind](obj, now or utcnow(), limits)

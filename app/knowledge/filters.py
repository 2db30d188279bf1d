"""The memory-item query language, parsed into a validated AST (pure, no I/O).

Input (the seed's ``MemoryBackend.query`` shape)::

    {"kind": "decision",                    # exact match
     "tags": ["bug_fix", "perf"],           # list membership: any of
     "importance": {"$gte": 0.7, "$lt": 1}, # operators, ANDed
     "kind": ["decision", "convention"]}    # a list on a scalar field: any of (IN)

``order_by`` follows the seed's sign convention: ``"importance"`` sorts
*descending* (the default, newest/highest first) and ``"-importance"`` sorts
*ascending*. ``"timestamp"`` is an alias of ``created_at``. Every ordering ends
with ``id`` in the same direction so keyset cursors are total.

The repository compiles the AST to SQL (filters run in the database); ``matches``
is the same semantics in Python, used as a test oracle. Unknown fields and
operators, wrong value types and empty lists are all reported together in one
``FilterError`` (rendered as 422).

Decisions (spec silent): ordering operators apply to numbers and timestamps only
(string order depends on the database collation); ``$ne`` on ``tags`` means "has
none of"; a ``null`` value is accepted only for the nullable ``text`` field.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from app.knowledge.scopes import ScopeError, parse_scope

Op = Literal[
    "eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "any", "none", "is_null", "not_null"
]
FieldType = Literal["str", "float", "int", "datetime", "uuid", "tags", "scope"]

OPERATORS: dict[str, str] = {
    "$eq": "eq",
    "$ne": "ne",
    "$gt": "gt",
    "$gte": "gte",
    "$lt": "lt",
    "$lte": "lte",
}
_ORDERED_OPS = {"gt", "gte", "lt", "lte"}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one queryable field is typed, compared and ordered."""

    type: FieldType
    orderable: bool = False
    nullable: bool = False


FIELDS: dict[str, FieldSpec] = {
    "id": FieldSpec("uuid", orderable=True),
    "scope": FieldSpec("scope"),
    "kind": FieldSpec("str", orderable=True),
    "source": FieldSpec("str", orderable=True),
    "text": FieldSpec("str", nullable=True),
    "tags": FieldSpec("tags"),
    "importance": FieldSpec("float", orderable=True),
    "token_cost": FieldSpec("int", orderable=True),
    "created_at": FieldSpec("datetime", orderable=True),
    "updated_at": FieldSpec("datetime", orderable=True),
}
ALIASES = {"timestamp": "created_at"}
DEFAULT_ORDER = "timestamp"
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
# Values in one filter list (each is a query argument; PostgreSQL takes at most 32,767).
# LOOM_FILTER_MAX_VALUES, set by `configure` at startup.
MAX_LIST_VALUES = 1000


def configure(max_list_values: int) -> None:
    global MAX_LIST_VALUES
    MAX_LIST_VALUES = max_list_values


class FilterError(ValueError):
    """The query is invalid; ``errors`` lists every problem as {"loc", "msg"}."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Condition:
    """One predicate: ``field op value`` (value is already typed, tuples for lists)."""

    field: str
    op: Op
    value: Any = None


@dataclass(frozen=True, slots=True)
class OrderBy:
    """Sort field; ties are broken by ``id`` in the same direction."""

    field: str = "created_at"
    descending: bool = True


@dataclass(frozen=True, slots=True)
class ItemQuery:
    """A validated query: conditions (ANDed), ordering and page size."""

    conditions: tuple[Condition, ...] = ()
    order: OrderBy = OrderBy()
    limit: int = DEFAULT_LIMIT


def parse_order_by(text: object) -> OrderBy:
    """Parse ``"field"`` (descending) or ``"-field"`` (ascending), seed convention."""
    if not isinstance(text, str) or not text.strip("-"):
        raise FilterError(
            [{"loc": ["order_by"], "msg": "must be a field name, optionally prefixed by '-'"}]
        )
    ascending = text.startswith("-")
    name = text[1:] if ascending else text
    name = ALIASES.get(name, name)
    spec = FIELDS.get(name)
    if spec is None or not spec.orderable:
        allowed = sorted([f for f, s in FIELDS.items() if s.orderable] + list(ALIASES))
        raise FilterError(
            [{"loc": ["order_by"], "msg": f"cannot order by {name!r}; one of {allowed}"}]
        )
    return OrderBy(name, descending=not ascending)


def parse_query(
    filters: Mapping[str, Any] | None,
    *,
    order_by: object = DEFAULT_ORDER,
    limit: object = DEFAULT_LIMIT,
) -> ItemQuery:
    """Validate ``filters``/``order_by``/``limit`` into an ItemQuery or raise FilterError."""
    errors: list[dict[str, Any]] = []
    conditions: list[Condition] = []
    if filters is None:
        filters = {}
    if not isinstance(filters, Mapping):
        raise FilterError([{"loc": ["filters"], "msg": "must be an object"}])
    unknown = [k for k in filters if ALIASES.get(k, k) not in FIELDS]
    for key in unknown:
        errors.append(
            {"loc": ["filters", key], "msg": f"unknown field; known fields: {sorted(FIELDS)}"}
        )
    for key, raw in filters.items():
        if key in unknown:
            continue
        name = ALIASES.get(key, key)
        conditions.extend(_parse_field(name, FIELDS[name], raw, errors))
    order = OrderBy()
    try:
        order = parse_order_by(order_by)
    except FilterError as exc:
        errors.extend(exc.errors)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        errors.append({"loc": ["limit"], "msg": f"must be an integer from 1 to {MAX_LIMIT}"})
        limit = DEFAULT_LIMIT
    if errors:
        raise FilterError(errors)
    return ItemQuery(tuple(conditions), order, limit)


def _parse_field(
    name: str, spec: FieldSpec, raw: Any, errors: list[dict[str, Any]]
) -> list[Condition]:
    loc = ["filters", name]
    if isinstance(raw, Mapping):
        if not raw:
            errors.append({"loc": loc, "msg": "operator object is empty"})
            return []
        out = []
        for op_key, value in raw.items():
            op = OPERATORS.get(op_key)
            if op is None:
                errors.append(
                    {"loc": [*loc, op_key], "msg": f"unknown operator; known: {sorted(OPERATORS)}"}
                )
                continue
            cond = _condition(name, spec, op, value, [*loc, op_key], errors)
            if cond is not None:
                out.append(cond)
        return out
    cond = _condition(name, spec, "eq", raw, loc, errors)
    return [cond] if cond is not None else []


def _condition(
    name: str, spec: FieldSpec, op: str, value: Any, loc: list[Any], errors: list[dict[str, Any]]
) -> Condition | None:
    def fail(msg: str) -> None:
        errors.append({"loc": loc, "msg": msg})

    if value is None:
        if not spec.nullable or op not in ("eq", "ne"):
            fail("null is only allowed with $eq/$ne on 'text'")
            return None
        return Condition(name, "is_null" if op == "eq" else "not_null")
    if op in _ORDERED_OPS and spec.type not in ("float", "int", "datetime", "uuid"):
        fail(
            f"{op!r} needs a number or timestamp field; "
            f"{name!r} supports exact match, lists, $eq, $ne"
        )
        return None
    if isinstance(value, list):
        if op in _ORDERED_OPS:
            fail("a list is only allowed for exact match, $eq and $ne")
            return None
        if not value:
            fail("list must not be empty")
            return None
        if len(value) > MAX_LIST_VALUES:
            fail(f"a list holds at most {MAX_LIST_VALUES} values (got {len(value)})")
            return None
        typed = [_coerce(spec, v) for v in value]
        if any(t is _INVALID for t in typed):
            fail(f"every list element must be a valid {spec.type}")
            return None
        values = tuple(dict.fromkeys(typed))  # dedupe, keep order
        if spec.type == "tags":
            return Condition(name, "any" if op == "eq" else "none", values)
        return Condition(name, "in" if op == "eq" else "nin", values)
    typed = _coerce(spec, value)
    if typed is _INVALID:
        fail(f"expected a {spec.type} value")
        return None
    if spec.type == "tags":
        return Condition(name, "any" if op == "eq" else "none", (typed,))
    return Condition(name, op, typed)  # type: ignore[arg-type]


_INVALID = object()
_NUM_LIMIT = 2**31 - 1  # token_cost is a 32-bit integer column


def _coerce(spec: FieldSpec, value: Any) -> Any:
    """Type a JSON value for ``spec`` or return _INVALID."""
    t = spec.type
    if isinstance(value, bool) or value is None:
        return _INVALID
    if t in ("str", "tags"):
        return value if isinstance(value, str) else _INVALID
    if t == "scope":
        try:
            return str(parse_scope(value))
        except ScopeError:
            return _INVALID
    if t in ("float", "int"):
        # Bounded so the database never sees an out-of-range parameter (that would be a 5xx).
        if not isinstance(value, int | float) or not -_NUM_LIMIT <= value <= _NUM_LIMIT:
            return _INVALID
        return float(value) if t == "float" else value
    if t == "uuid":
        try:
            return uuid.UUID(str(value)) if isinstance(value, str) else _INVALID
        except ValueError:
            return _INVALID
    if t == "datetime":
        if not isinstance(value, str):
            return _INVALID
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return _INVALID
        if not 1 < parsed.year < 9999:
            return _INVALID  # keeps timezone shifts and the driver's encoding in range
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return _INVALID  # pragma: no cover


def matches(query: ItemQuery, record: Mapping[str, Any]) -> bool:
    """Python reference semantics of ``query.conditions`` over one record (test oracle)."""
    return all(_match(c, record.get(c.field)) for c in query.conditions)


def _match(c: Condition, v: Any) -> bool:
    op, x = c.op, c.value
    if op == "is_null":
        return v is None
    if op == "not_null":
        return v is not None
    if op == "any":
        return any(t in v for t in x)
    if op == "none":
        return not any(t in v for t in x)
    if v is None:
        return False  # SQL three-valued logic: NULL never satisfies a comparison
    if op == "in":
        return v in x
    if op == "nin":
        return v not in x
    return {
        "eq": v == x,
        "ne": v != x,
        "gt": v > x,
        "gte": v >= x,
        "lt": v < x,
        "lte": v <= x,
    }[op]

"""Memory items: create, read, query, delete, promote, task completion, clear.

Decisions where the spec is silent:
- Knowledge belongs to the tenant, not to one agent: every key of the tenant
  (agent keys included) reads and writes it; isolation is by scope, so a query
  or package for ``project/a`` never sees ``project/b``.
- Promotion *moves* the item (same id) one tier up; it is never automatic.
  Entering a project counts as an insert for eviction.
- ``source`` defaults to the caller's agent id, else ``api``.
- Clearing ``global`` without ``confirm: true`` is 400 ``confirmation_required``.
- The ``agent`` tier is the exception to tenant-wide knowledge: private to its
  agent (``app.knowledge.repository.readable_sql``); another agent's item is 404.
- Every change (create, edit, promote, delete, clear, eviction) writes a version row saying
  who, when and why (``app.knowledge.versions``); an item written by hand is valid
  from when it was written.
- The ``user`` tier follows ``app.users.access``: writing ``user/<id>`` needs
  the same visibility as reading it (404 ``user_not_found`` otherwise); the bare ``user``
  scope only means something in a session's facts config (400 here).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg

from app.auth.caller import AgentMismatch, Caller
from app.core.errors import BadRequest, Conflict, NotFound, Unprocessable
from app.core.pagination import decode_cursor, fetch_limit, invalid_cursor, page
from app.core.tokens import count_text
from app.knowledge import repository, versions
from app.knowledge.asof import read_then
from app.knowledge.eviction import eviction_count
from app.knowledge.filters import FIELDS, Condition, FilterError, ItemQuery, parse_query
from app.knowledge.render import item_line
from app.knowledge.schemas import (
    ClearRequest,
    ClearResult,
    MemoryItemCreate,
    MemoryItemList,
    MemoryItemPublic,
    MemoryItemQuery,
    TaskComplete,
    TaskCompleteResult,
)
from app.knowledge.scopes import (
    Scope,
    ScopeError,
    agent_scope,
    parse_scope,
    promotion_target,
    scope_from_columns,
)
from app.knowledge.versions import Actor, actor_of
from app.models.memory_item import MemoryItemRow
from app.users import access as users_access


def item_scope(item: Any) -> Scope:
    return scope_from_columns(item.scope_kind, item.scope_id)


def to_public(item: Any) -> MemoryItemPublic:
    """An item (a row, or a fact as facts reads it) for the API."""
    return MemoryItemPublic(
        id=item.id,
        scope=str(scope_from_columns(item.scope_kind, item.scope_id)),
        kind=item.kind,
        source=item.source,
        tags=list(item.tags or []),
        importance=item.importance,
        text=item.text,
        payload=item.payload,
        token_cost=item.token_cost,
        created_at=item.created_at,
        updated_at=item.updated_at,
        version=item.version,
        valid_from=item.valid_from,
        invalid_at=item.invalid_at,
        superseded_by=item.superseded_by,
        source_session_id=item.source_session_id,
        source_seqs=list(item.source_seqs or []),
        key=getattr(item, "fact_key", None),
        stated_at=getattr(item, "stated_at", None),
        sources=list(getattr(item, "sources", None) or []),
    )


def resolve_scope(caller: Caller, scope: Scope) -> Scope:
    """``agent`` -> the caller's own agent tier; ``agent/<id>`` must be the caller's agent
    (403 ``agent_mismatch``, as for the shared-memory agent namespace). ``user`` needs its
    id here (``user/<user_id>``; whether the caller may see that user is
    `require_scope_access`)."""
    if scope.kind == "user":
        if scope.id is None:
            raise BadRequest("Name the user: user/<user_id>.", code="user_required")
        return scope
    if scope.kind != "agent":
        return scope
    own = caller.require_agent()
    if scope.id is not None and scope.id != own:
        raise AgentMismatch()
    return agent_scope(own)


async def require_scope_access(conn: asyncpg.Connection, caller: Caller, scope: Scope) -> None:
    """A ``user/<id>`` scope the caller may not see is 404 ``user_not_found``."""
    if scope.kind == "user" and scope.id is not None:
        await users_access.require_visible(conn, caller, scope.id)


def every_user(caller: Caller) -> bool:
    return users_access.sees_every_user(caller.role)


def token_cost(kind: str, text: str | None, payload: Any) -> int:
    """Tokens of the item exactly as a knowledge block renders it (never 0)."""
    return max(1, count_text(item_line(kind, text, payload)))


def parse_filters(filters: dict[str, Any], *, loc: str = "filters", **kw: Any) -> ItemQuery:
    """parse_query, with errors as a 422 whose details list every problem."""
    try:
        return parse_query(filters, **kw)
    except FilterError as exc:
        details = [
            {
                "loc": ["body", *(e["loc"] if e["loc"][0] != "filters" else [loc, *e["loc"][1:]])],
                "msg": e["msg"],
                "type": "value_error",
            }
            for e in exc.errors
        ]
        raise Unprocessable(
            "The query is not valid.", code="invalid_query", details=details
        ) from exc


async def create_item(
    conn: asyncpg.Connection,
    caller: Caller,
    body: MemoryItemCreate,
    *,
    max_items: int,
    via: str = "api",
) -> MemoryItemRow:
    """Store an item (valid from now, version 1 `add`); a project past ``max_items`` then
    evicts its lowest/oldest 10%."""
    scope = resolve_scope(caller, parse_scope(body.scope))
    await require_scope_access(conn, caller, scope)
    now = datetime.now(UTC)
    item = MemoryItemRow(
        id=uuid.uuid4(),
        tenant_id=caller.tenant_id,
        scope_kind=scope.kind,
        scope_id=scope.storage_id,
        kind=body.kind,
        source=body.source or caller.agent_id or "api",
        tags=body.tags,
        importance=body.importance,
        text=body.text,
        payload=body.payload,
        token_cost=token_cost(body.kind, body.text, body.payload),
        created_at=now,
        updated_at=now,
        valid_from=now,
        invalid_at=None,
        superseded_by=None,
        source_session_id=None,
        source_seqs=[],
        version=1,
        fact_key=None,
        stated_at=now,
        sources=[],
    )
    actor = actor_of(caller, via)
    if scope.kind == "project":
        await repository.lock_scope(conn, caller.tenant_id, scope)
    item = await repository.add(conn, item)
    await versions.record(conn, item, "add", actor, "written")
    if scope.kind == "project":
        await enforce_max_items(conn, caller.tenant_id, scope, max_items, actor)
    return item


async def enforce_max_items(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    max_items: int,
    actor: Actor | None = None,
) -> int:
    """Evict per eviction.py when the project is past its cap; returns how many went."""
    n = eviction_count(await repository.count(conn, tenant_id, scope), max_items)
    gone = await repository.evict_lowest(conn, tenant_id, scope, n)
    await versions.record_removed(
        conn, gone, actor or Actor("extraction"), f"evicted: {scope} passed max_items ({max_items})"
    )
    return len(gone)


async def get_item(
    conn: asyncpg.Connection, caller: Caller, item_id: uuid.UUID, *, for_update: bool = False
) -> MemoryItemRow:
    """The item if the caller may read it (404 ``memory_item_not_found`` otherwise)."""
    item = await repository.get(
        conn,
        caller.tenant_id,
        item_id,
        agent_id=caller.agent_id,
        for_update=for_update,
        every_user=every_user(caller),
    )
    if item is None:
        raise NotFound("No such memory item.", code="memory_item_not_found")
    return item


async def delete_item(
    conn: asyncpg.Connection, caller: Caller, item_id: uuid.UUID, *, via: str = "api"
) -> None:
    gone = await repository.delete(
        conn, caller.tenant_id, item_id, agent_id=caller.agent_id, every_user=every_user(caller)
    )
    if gone is None:
        raise NotFound("No such memory item.", code="memory_item_not_found")
    await versions.record_removed(conn, [gone], actor_of(caller, via), "deleted")


def _cursor_value(field: str, raw: Any) -> Any:
    t = FIELDS[field].type
    if t == "datetime":
        return datetime.fromisoformat(raw)
    if t == "uuid":
        return uuid.UUID(raw)
    if t == "float":
        return float(raw)
    if t == "int":
        if not isinstance(raw, int):
            raise ValueError("int expected")
        return raw
    if not isinstance(raw, str):
        raise ValueError("str expected")
    return raw


async def query_items(
    conn: asyncpg.Connection,
    caller: Caller,
    body: MemoryItemQuery,
    *,
    include_invalidated: bool = False,
    as_of: datetime | None = None,
) -> MemoryItemList:
    """One page of items matching the filters, in ``order_by`` order (superseded facts
    only with ``include_invalidated``); with ``as_of`` the items true at that time, each
    as it read then."""
    q = parse_filters(body.filters, order_by=body.order_by, limit=body.limit)
    order_tag = f"{q.order.field}:{'desc' if q.order.descending else 'asc'}"
    after = None
    data = decode_cursor(body.cursor, {"o": str, "v": object, "i": str})
    if data is not None:
        try:
            if data["o"] != order_tag:
                raise ValueError("order changed")
            after = (_cursor_value(q.order.field, data["v"]), uuid.UUID(data["i"]))
        except (ValueError, TypeError) as exc:
            raise invalid_cursor("The cursor does not belong to this query.") from exc
    fetched = await repository.query(
        conn,
        caller.tenant_id,
        q.conditions,
        q.order,
        fetch_limit(q.limit),
        after,
        agent_id=caller.agent_id,
        include_invalidated=include_invalidated,
        as_of=as_of,
        every_user=every_user(caller),
    )

    def cursor_after(last: Any) -> dict[str, Any]:
        value = getattr(last, q.order.field)
        return {
            "o": order_tag,
            "v": value.isoformat()
            if isinstance(value, datetime)
            else str(value)
            if isinstance(value, uuid.UUID)
            else value,
            "i": str(last.id),
        }

    rows, next_cursor = page(fetched, q.limit, cursor_after)
    shown = rows if as_of is None else await read_then(conn, caller.tenant_id, rows, as_of)
    return MemoryItemList(items=[to_public(r) for r in shown], next_cursor=next_cursor)


async def promote_item(
    conn: asyncpg.Connection,
    caller: Caller,
    item_id: uuid.UUID,
    project_id: str | None,
    *,
    max_items: int,
) -> MemoryItemRow:
    """Move an item one tier up: task -> project (project_id needed) -> global."""
    item = await get_item(conn, caller, item_id)
    try:
        target = promotion_target(item_scope(item), project_id=project_id)
    except ScopeError as exc:
        # The item's tier decides (global: nowhere to go; task: needs project_id), so a
        # well-formed request that does not fit it is a conflict with its state.
        raise Conflict(str(exc), code="cannot_promote") from exc
    if target.kind == "project":
        await repository.lock_scope(conn, caller.tenant_id, target)
    origin = item_scope(item)
    moved = await repository.move_one(conn, caller.tenant_id, item.id, target, datetime.now(UTC))
    if moved is None:  # deleted since it was read
        raise NotFound("No such memory item.", code="memory_item_not_found")
    await versions.record(
        conn, moved, "promote", actor_of(caller), f"promoted from {origin} to {target}"
    )
    if target.kind == "project":
        # The promoted item itself may be among the evicted if it ranks lowest.
        await enforce_max_items(conn, caller.tenant_id, target, max_items, actor_of(caller))
    return moved


async def complete_task(
    conn: asyncpg.Connection, caller: Caller, task_id: str, body: TaskComplete, *, max_items: int
) -> TaskCompleteResult:
    """Promote the listed task items to the project, then clear the task.

    Retry-safe: an id already in the target project counts as promoted. An id
    that is neither in the task nor in that project is a 404 and nothing changes.
    """
    task = Scope("task", task_id)
    await repository.lock_scope(conn, caller.tenant_id, task)
    ids = list(dict.fromkeys(body.promote))
    evicted = 0
    if ids:
        assert body.project_id is not None  # schema validator
        project = Scope("project", body.project_id)
        rows = {
            r.id: item_scope(r)
            for r in await repository.get_many(
                conn, caller.tenant_id, ids, agent_id=caller.agent_id, every_user=every_user(caller)
            )
        }
        missing = [str(i) for i in ids if rows.get(i) not in (task, project)]
        if missing:
            raise NotFound(
                "Some items to promote are not in this task.",
                code="memory_item_not_found",
                details={"ids": missing},
            )
        await repository.lock_scope(conn, caller.tenant_id, project)
        now = datetime.now(UTC)
        for i in ids:
            if rows[i] != task:
                continue
            moved = await repository.move_one(conn, caller.tenant_id, i, project, now)
            assert moved is not None  # the task's lock is held: no writer of it deleted it
            await versions.record(
                conn,
                moved,
                "promote",
                actor_of(caller),
                f"promoted from {task} to {project} (task completed)",
            )
        evicted = await enforce_max_items(
            conn, caller.tenant_id, project, max_items, actor_of(caller)
        )
    cleared = await repository.clear(conn, caller.tenant_id, task)
    await versions.record_removed(conn, cleared, actor_of(caller), f"{task} completed")
    return TaskCompleteResult(task_id=task_id, promoted=ids, cleared=len(cleared), evicted=evicted)


async def clear_items(conn: asyncpg.Connection, caller: Caller, body: ClearRequest) -> ClearResult:
    """Delete a scope's (matching) items; ``global`` needs ``confirm: true``."""
    scope = resolve_scope(caller, parse_scope(body.scope))
    await require_scope_access(conn, caller, scope)
    if scope.kind == "global" and not body.confirm:
        raise BadRequest(
            'Clearing global memory needs "confirm": true.', code="confirmation_required"
        )
    conditions: tuple[Condition, ...] = parse_filters(body.filters).conditions
    await repository.lock_scope(conn, caller.tenant_id, scope)
    removed = await repository.clear(conn, caller.tenant_id, scope, conditions)
    await versions.record_removed(conn, removed, actor_of(caller), f"{scope} cleared")
    return ClearResult(scope=str(scope), removed=len(removed))

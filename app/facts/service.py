"""Facts for the API, the built-in tools and MCP: history, search, forget, extraction
status, extract-and-wait. Reads go through `app.knowledge.repository.readable` (another
agent's `agent` tier is 404)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg

from app.auth.caller import Caller
from app.core.errors import Conflict, NotFound
from app.core.queue import Queue
from app.facts import repository as repo
from app.facts import state as runs
from app.facts.extract import Deps, Outcome
from app.facts.item import Fact
from app.facts.policy import FACT_KIND, FactsConfig
from app.facts.schemas import FactExtractionPublic, FactList, FactSearch
from app.facts.tasks import claimed, finished, record, run_once
from app.facts.trigger import EXTRACT_JOB, extract_job_id, flush
from app.knowledge import versions as item_versions
from app.knowledge.asof import read_then
from app.knowledge.schemas import (
    MemoryItemHistory,
    MemoryItemPublic,
    MemoryItemVersionPublic,
)
from app.knowledge.scopes import parse_scope
from app.knowledge.service import get_item, resolve_scope, to_public
from app.knowledge.timeline import version_at
from app.knowledge.versions import Actor
from app.models.session import SessionRow


async def status(conn: asyncpg.Connection, session: SessionRow) -> FactExtractionPublic:
    row = await runs.get_state(conn, session.tenant_id, session.id)
    if row is None:
        return FactExtractionPublic(status="idle", watermark_seq=0, skipped=None, last_result=None)
    return FactExtractionPublic.model_validate(row, from_attributes=True)


def require_enabled(session: SessionRow) -> FactsConfig:
    cfg = FactsConfig.from_stored((session.config or {}).get("facts"))
    if not cfg.enabled:
        raise Conflict(
            "Facts are off for this session: set config.facts.enabled.", code="facts_disabled"
        )
    return cfg


async def extract_now(
    deps: Deps, session: SessionRow, *, within: float, retry_failed: bool = False
) -> Outcome | None:
    """One extraction run in the caller (`?wait=true`); None past `within` seconds (what
    was applied stays). Raises what the run raised, after recording it."""
    tid, sid = session.tenant_id, session.id
    loop = asyncio.get_running_loop()
    began = loop.time()
    # one run at a time: a job running now is waited for, then what it left
    if not await claimed(deps, tid, sid, f"wait:{uuid.uuid4()}", wait=within):
        return None
    try:
        async with asyncio.timeout(max(0.0, within - (loop.time() - began))):
            outcome = await run_once(deps, tid, sid, retry_failed=retry_failed)
    except TimeoutError:  # the claim goes: the flush that follows runs what is left
        await record(deps.connect, tid, sid, status="pending")
        return None
    except Exception as exc:
        await record(
            deps.connect,
            tid,
            sid,
            status="failed",
            last_error=f"{type(exc).__name__}: {exc}"[:300],
            finished_at=datetime.now(UTC),
        )
        raise
    await record(deps.connect, tid, sid, **finished(outcome))
    return outcome


async def enqueue(
    queue: Queue, deps: Deps, session: SessionRow, *, retry_failed: bool = False
) -> bool:
    """Extract now in the background (a flush)."""
    if retry_failed:
        return await queue.enqueue(
            EXTRACT_JOB,
            str(session.tenant_id),
            str(session.id),
            False,
            True,
            _job_id=extract_job_id(session.id),
        )
    return await flush(queue, deps.connect, session.tenant_id, session.id)


def version_public(v: Any) -> MemoryItemVersionPublic:
    return MemoryItemVersionPublic(
        version=v.version,
        change=v.change,
        text=v.text,
        importance=v.importance,
        tags=list(v.tags or []),
        valid_from=v.valid_from,
        invalid_at=v.invalid_at,
        superseded_by=v.superseded_by,
        source_session_id=v.source_session_id,
        source_seqs=list(v.source_seqs or []),
        reason=v.reason,
        changed_at=v.changed_at,
        key=v.fact_key,
        stated_at=v.stated_at,
        sources=list(v.sources or []),
        actor=v.actor,
        actor_key_id=v.actor_key_id,
        actor_agent_id=v.actor_agent_id,
    )


async def history(
    conn: asyncpg.Connection, caller: Caller, item_id: uuid.UUID, as_of: datetime | None = None
) -> MemoryItemHistory:
    """An item's versions (oldest first), the fact that replaced it and those it replaced;
    with `as_of`, the version in effect then (none when it was not true then)."""
    item = await get_item(conn, caller, item_id)
    rows = await item_versions.versions(conn, caller.tenant_id, item.id)
    versions = [version_public(v) for v in rows]
    then = None
    if as_of is not None and (item.invalid_at is None or item.invalid_at > as_of):
        found = version_at(rows, as_of, created_at=item.created_at)
        then = version_public(found) if found is not None else None
    successor = None
    if item.superseded_by is not None:
        try:
            successor = to_public(await get_item(conn, caller, item.superseded_by))
        except NotFound:
            successor = None
    replaced = await repo.superseded(conn, caller.tenant_id, item.id, agent_id=caller.agent_id)
    return MemoryItemHistory(
        item=to_public(item),
        versions=versions,
        superseded_by=successor,
        supersedes=[to_public(r) for r in replaced],
        as_of=as_of,
        as_of_version=then,
    )


async def search_facts(conn: asyncpg.Connection, caller: Caller, body: FactSearch) -> FactList:
    """The facts of a scope best matching a query (valid ones unless asked; with `as_of`,
    those true then, as they read then)."""
    scope = resolve_scope(caller, parse_scope(body.scope))
    rows = await repo.nearest_facts(
        conn,
        caller.tenant_id,
        scope,
        body.query,
        limit=body.limit,
        agent_id=caller.agent_id,
        include_invalidated=body.include_invalidated,
        as_of=body.as_of,
    )
    if body.as_of is not None:
        rows = await read_then(conn, caller.tenant_id, rows, body.as_of)
    return FactList(items=[to_public(r) for r in rows])


async def forget_fact(
    conn: asyncpg.Connection,
    caller: Caller,
    item_id: uuid.UUID,
    reason: str,
    actor: Actor | None = None,
) -> MemoryItemPublic:
    """Invalidate a fact now (kept, with the reason in its history); a fact already
    invalid is 409 `fact_already_invalid`, an item that is not a fact 409 `not_a_fact`."""
    item = Fact.of(await get_item(conn, caller, item_id, for_update=True))
    if item.kind != FACT_KIND:
        raise Conflict(
            "Only facts (kind 'fact') are forgotten this way; delete other items.",
            code="not_a_fact",
        )
    if item.invalid_at is not None:
        raise Conflict("This fact is already invalid.", code="fact_already_invalid")
    now = datetime.now(UTC)
    item.invalid_at, item.updated_at = now, now
    item.version += 1
    await repo.update_item(conn, item)
    await item_versions.record(
        conn, item, "forget", actor or Actor("api", caller.key_id, caller.agent_id), reason
    )
    return to_public(item)

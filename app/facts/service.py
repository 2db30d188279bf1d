"""Facts for the API, the built-in tools and MCP: history, search, forget, extraction
status, extract-and-wait. Reads go through `app.knowledge.repository.readable` (another
agent's `agent` tier is 404)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.caller import Caller
from app.core.errors import Conflict, NotFound
from app.facts import repository as repo
from app.facts.extract import Deps, Outcome
from app.facts.policy import FACT_KIND, FactsConfig
from app.facts.tasks import enqueue_extraction, record, run_once
from app.knowledge.schemas import (
    FactExtractionPublic,
    FactList,
    FactSearch,
    MemoryItemHistory,
    MemoryItemPublic,
    MemoryItemVersionPublic,
)
from app.knowledge.scopes import parse_scope
from app.knowledge.service import get_item, resolve_scope, to_public
from app.models import Session


async def status(db: AsyncSession, session: Session) -> FactExtractionPublic:
    row = await repo.get_state(db, session.tenant_id, session.id)
    if row is None:
        return FactExtractionPublic(status="idle", watermark_seq=0, skipped=None,
                                    last_result=None)
    return FactExtractionPublic.model_validate(row, from_attributes=True)


def require_enabled(session: Session) -> FactsConfig:
    cfg = FactsConfig.from_stored((session.config or {}).get("facts"))
    if not cfg.enabled:
        raise Conflict("Facts are off for this session: set config.facts.enabled.",
                       code="facts_disabled")
    return cfg


async def extract_now(deps: Deps, session: Session, *, within: float) -> Outcome | None:
    """One extraction run in the caller (`?wait=true`), forced; None past `within` seconds
    (what was applied stays). Raises what the run raised, after recording it."""
    tid, sid = session.tenant_id, session.id
    await record(deps.sessionmaker, tid, sid, status="running", attempts=1,
                 started_at=datetime.now(UTC), finished_at=None)
    try:
        async with asyncio.timeout(within):
            outcome = await run_once(deps, tid, sid, force=True)
    except TimeoutError:
        return None
    except Exception as exc:
        await record(deps.sessionmaker, tid, sid, status="failed",
                     last_error=f"{type(exc).__name__}: {exc}"[:300],
                     finished_at=datetime.now(UTC))
        raise
    await record(deps.sessionmaker, tid, sid,
                 status="skipped" if outcome.skipped and not outcome.batches else "succeeded",
                 skipped=outcome.skipped, last_error=None, last_result=outcome.as_dict(),
                 finished_at=datetime.now(UTC))
    return outcome


async def enqueue(holder: Any, deps: Deps, session: Session) -> bool:
    return await enqueue_extraction(holder, deps.sessionmaker, session.tenant_id, session.id,
                                    force=True)


def version_public(v: Any) -> MemoryItemVersionPublic:
    return MemoryItemVersionPublic(
        version=v.version, change=v.change, text=v.text, importance=v.importance,
        tags=list(v.tags or []), valid_from=v.valid_from, invalid_at=v.invalid_at,
        superseded_by=v.superseded_by, source_session_id=v.source_session_id,
        source_seqs=list(v.source_seqs or []), reason=v.reason, changed_at=v.changed_at)


async def history(db: AsyncSession, caller: Caller, item_id: uuid.UUID) -> MemoryItemHistory:
    """An item's versions (oldest first), the fact that replaced it and those it replaced."""
    item = await get_item(db, caller, item_id)
    versions = [version_public(v) for v in await repo.versions(db, caller.tenant_id, item.id)]
    successor = None
    if item.superseded_by is not None:
        try:
            successor = to_public(await get_item(db, caller, item.superseded_by))
        except NotFound:
            successor = None
    replaced = await repo.superseded(db, caller.tenant_id, item.id, agent_id=caller.agent_id)
    return MemoryItemHistory(item=to_public(item), versions=versions, superseded_by=successor,
                             supersedes=[to_public(r) for r in replaced])


async def search_facts(db: AsyncSession, caller: Caller, body: FactSearch) -> FactList:
    """The facts of a scope best matching a query (valid ones unless asked)."""
    scope = resolve_scope(caller, parse_scope(body.scope))
    rows = await repo.nearest_facts(db, caller.tenant_id, scope, body.query, limit=body.limit,
                                    agent_id=caller.agent_id,
                                    include_invalidated=body.include_invalidated)
    return FactList(items=[to_public(r) for r in rows])


async def forget_fact(db: AsyncSession, caller: Caller, item_id: uuid.UUID,
                      reason: str) -> MemoryItemPublic:
    """Invalidate a fact now (kept, with the reason in its history); a fact already
    invalid is 409 `fact_already_invalid`, an item that is not a fact 409 `not_a_fact`."""
    item = await get_item(db, caller, item_id, for_update=True)
    if item.kind != FACT_KIND:
        raise Conflict("Only facts (kind 'fact') are forgotten this way; delete other items.",
                       code="not_a_fact")
    if item.invalid_at is not None:
        raise Conflict("This fact is already invalid.", code="fact_already_invalid")
    now = datetime.now(UTC)
    item.invalid_at, item.updated_at = now, now
    item.version += 1
    await db.flush()
    await repo.add_version(db, item, "forget", reason=reason)
    return to_public(item)

"""Fact extraction and a fact's history over HTTP (issue 19)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from app.auth.deps import CallerDep
from app.core.db import DbDep
from app.core.errors import ERROR_RESPONSES
from app.facts import service as facts_service
from app.facts.extract import Deps
from app.knowledge.schemas import ExtractPublic, FactExtractionPublic, MemoryItemHistory
from app.sessions.deps import SessionDep
from app.state import StateDep

router = APIRouter(tags=["knowledge"], responses=ERROR_RESPONSES)


@router.post("/sessions/{session_id}/memory/extract", response_model=ExtractPublic,
             status_code=202, responses={200: {"model": ExtractPublic}},
             summary="Extract durable facts from a session")
async def extract_facts(session: SessionDep, db: DbDep, state: StateDep, response: Response,
                        wait: bool = False) -> ExtractPublic:
    """Enqueue fact extraction over the messages not read yet (202), or with `wait=true`
    run it now and answer with what it did (200). A run the model's answer or the LLM
    failed answers 202: the queued job retries with backoff (status on GET). 409
    `facts_disabled` unless the session's `config.facts.enabled`."""
    facts_service.require_enabled(session)
    deps = Deps(state.sessionmaker, state.llm, state.settings)
    if wait:
        try:
            outcome = await facts_service.extract_now(
                deps, session, within=state.settings.facts_wait_seconds)
        except Exception:
            outcome = None
        if outcome is not None:
            response.status_code = 200
            return ExtractPublic(enqueued=False, result=outcome.as_dict(),
                                 extraction=await facts_service.status(db, session))
    ok = await facts_service.enqueue(state.queue, deps, session)
    return ExtractPublic(enqueued=ok, result=None,
                         extraction=await facts_service.status(db, session))


@router.get("/sessions/{session_id}/memory/extract", response_model=FactExtractionPublic,
            summary="Get a session's fact extraction status")
async def get_fact_extraction(session: SessionDep, db: DbDep) -> FactExtractionPublic:
    """The watermark, the latest job (status, attempts, last error or skip reason, what it
    did) and the LLM calls and tokens spent on this session's facts."""
    return await facts_service.status(db, session)


@router.get("/memory-items/{item_id:uuid}/history", response_model=MemoryItemHistory,
            summary="A knowledge item's versions")
async def get_memory_item_history(item_id: uuid.UUID, db: DbDep,
                                  caller: CallerDep) -> MemoryItemHistory:
    """Every version of the item (oldest first), the fact that replaced it and the facts
    it replaced."""
    return await facts_service.history(db, caller, item_id)

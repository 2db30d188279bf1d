"""Fact extraction, a fact's history and corrections over HTTP."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Header, Query, Request, Response

from app.auth.deps import CallerDep, DbDep
from app.core.errors import ERROR_RESPONSES, ErrorEnvelope
from app.core.times import AS_OF_DOC, AsOf
from app.facts import edit
from app.facts import service as facts_service
from app.facts.extract import Deps
from app.facts.schemas import ExtractPublic, FactExtractionPublic
from app.knowledge import examples
from app.knowledge.schemas import MemoryItemHistory, MemoryItemPublic, MemoryItemUpdate
from app.knowledge.service import to_public
from app.sessions.deps import SessionDep
from app.state import app_state

router = APIRouter(tags=["knowledge"], responses=ERROR_RESPONSES)


@router.post(
    "/sessions/{session_id}/memory/extract",
    response_model=ExtractPublic,
    status_code=202,
    responses={200: {"model": ExtractPublic}},
    summary="Extract durable facts from a session",
)
async def extract_facts(
    session: SessionDep,
    db: DbDep,
    request: Request,
    response: Response,
    wait: bool = False,
    retry_failed: bool = False,
) -> ExtractPublic:
    """Extract the messages not read yet now, without waiting for N messages or T seconds
    of quiet (a flush): enqueued (202), or with `wait=true` run in the request and answered
    with what it did (200). `retry_failed=true` first re-runs the ranges whose batch failed
    every try. A run the model's answer or the LLM failed answers 202: the queued job
    retries with backoff (status on GET). 409 `facts_disabled` unless the session's
    `config.facts.enabled`."""
    facts_service.require_enabled(session)
    state = app_state(request.app)
    deps = Deps(state.db_connection, state.llm, state.settings)
    if wait:
        try:
            outcome = await facts_service.extract_now(
                deps, session, within=state.settings.facts_wait_seconds, retry_failed=retry_failed
            )
        except Exception:
            outcome = None
        if outcome is not None:
            response.status_code = 200
            return ExtractPublic(
                enqueued=False,
                result=outcome.as_dict(),
                extraction=await facts_service.status(db, session),
            )
    ok = await facts_service.enqueue(state.queue, deps, session, retry_failed=retry_failed)
    return ExtractPublic(
        enqueued=ok,
        result=None,
        extraction=await facts_service.status(db, session),
    )


@router.get(
    "/sessions/{session_id}/memory/extract",
    response_model=FactExtractionPublic,
    summary="Get a session's fact extraction status",
)
async def get_fact_extraction(session: SessionDep, db: DbDep) -> FactExtractionPublic:
    """The watermark, the latest job (status, attempts, last error or skip reason, what it
    did) and the LLM calls and tokens spent on this session's facts."""
    return await facts_service.status(db, session)


@router.get(
    "/memory-items/{item_id:uuid}/history",
    response_model=MemoryItemHistory,
    summary="A knowledge item's versions",
)
async def get_memory_item_history(
    item_id: uuid.UUID,
    db: DbDep,
    caller: CallerDep,
    as_of: Annotated[
        AsOf | None,
        Query(
            description=(
                "Also give the version in effect at this time (`as_of_version`). " + AS_OF_DOC
            )
        ),
    ] = None,
) -> MemoryItemHistory:
    """Every version of the item (oldest first: who, when, why), the fact that replaced it
    and the facts it replaced."""
    return await facts_service.history(db, caller, item_id, as_of)


@router.patch(
    "/memory-items/{item_id:uuid}",
    response_model=MemoryItemPublic,
    responses={428: {"model": ErrorEnvelope}},
    summary="Correct a knowledge item (a fact)",
)
async def patch_memory_item(
    item_id: uuid.UUID,
    body: Annotated[MemoryItemUpdate, Body(openapi_examples=examples.ITEM_UPDATE)],
    db: DbDep,
    caller: CallerDep,
    response: Response,
    if_match: Annotated[
        str | None, Header(description=('The version it corrects, as its ETag (`"3"`); required.'))
    ] = None,
) -> MemoryItemPublic:
    """Change text, importance, tags, key or validity; only the fields given change. Needs
    `If-Match` with the item's version (428 without it, 409 `version_conflict` when it
    moved on). Writes a version `edit` with the reason, the caller's key and agent."""
    item = await edit.edit_item(db, caller, item_id, body, if_match)
    response.headers["ETag"] = edit.etag(item)
    return to_public(item)

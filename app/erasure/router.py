"""Erasure: its receipts, and every route that erases: an agent's private memory, a session
(`DELETE /sessions/{id}`) and a user (`DELETE /users/{id}`). The last two are erasure's
(sessions and users know nothing of it) and are shown in the API docs under their
resource's section (`sessions_router`, `users_router`, included beside those resources'
routers)."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from app.auth.deps import CallerDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core import tracing
from app.core.errors import ERROR_RESPONSES
from app.erasure import service
from app.erasure.schemas import ErasureList, ErasurePublic
from app.sessions.deps import SessionDep
from app.state import app_state

router = APIRouter(tags=["erasure"], responses=ERROR_RESPONSES)
sessions_router = APIRouter(tags=["sessions"], responses=ERROR_RESPONSES)
users_router = APIRouter(tags=["users"], responses=ERROR_RESPONSES)
IdPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
IdQuery = Annotated[str | None, Query(pattern=AGENT_ID_PATTERN)]


def answer(receipt: ErasurePublic, response: Response) -> ErasurePublic:
    """200 with a completed receipt, 202 while the erasure still runs (in a worker)."""
    response.status_code = 200 if receipt.status == "completed" else 202
    response.headers["Location"] = f"/v1/erasures/{receipt.erasure_id}"
    return receipt


@router.get(
    "/erasures/{erasure_id}", response_model=ErasurePublic, summary="Get an erasure's receipt"
)
async def get_erasure(erasure_id: uuid.UUID, caller: CallerDep, request: Request) -> ErasurePublic:
    """The receipt: counts per kind of data, start and end. Service and admin keys read
    every receipt of their tenant, an agent key the ones it asked for."""
    state = app_state(request.app)
    return await service.get_receipt(state, caller, erasure_id)


@router.get("/erasures", response_model=ErasureList, summary="List erasures, or find a subject's")
async def find_erasures(
    caller: CallerDep,
    request: Request,
    user_id: IdQuery = None,
    session_id: uuid.UUID | None = None,
    agent_id: IdQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> ErasureList:
    """The tenant's erasure receipts, newest first; with `user_id`, `session_id` or
    `agent_id`, only that subject's ("was X erased?": receipts keep no id, only a keyed
    hash of it, so this answers for someone who knows the id; several subjects at once
    match nothing, an erasure has one). Service and admin keys."""
    state = app_state(request.app)
    named = [
        (k, str(v))
        for k, v in (("user", user_id), ("session", session_id), ("agent", agent_id))
        if v is not None
    ]
    return ErasureList(items=await service.find(state, caller, named, limit))


@router.delete(
    "/agents/{agent_id}/memory",
    response_model=ErasurePublic,
    status_code=200,
    responses={202: {"model": ErasurePublic, "description": "Erasure running"}},
    summary="Erase an agent's private memory",
)
async def erase_agent_memory(
    agent_id: IdPath, caller: CallerDep, request: Request, response: Response
) -> ErasurePublic:
    """Erase the agent's `agent` knowledge tier (facts with every version) and its `agent`
    shared-memory namespace (with the references to it). Its own agent key, or service
    keys. Answers the receipt: 200 when done, 202 while a worker finishes it."""
    state = app_state(request.app)
    row = await service.erase_agent_memory(state, caller, agent_id)
    return answer(service.to_public(row), response)


@sessions_router.delete(
    "/sessions/{session_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a session and everything in it",
)
async def delete_session(session: SessionDep, caller: CallerDep, request: Request) -> Response:
    """Delete a session and everything derived from it: messages, summaries, snapshots,
    memory, search statistics, jobs, the facts drawn from it, its shared-memory scope with
    references and offloaded tool results, cached copies. It reads as deleted at once; a
    big session's rows go in batches by a worker. `Location` names the erasure's receipt
    (`GET /v1/erasures/{id}`)."""
    state = app_state(request.app)
    with tracing.memory_span("delete_memory_store", session.id, store_kind="session"):
        row = await service.erase_session(state, caller, session.id)
    return Response(status_code=204, headers={"Location": f"/v1/erasures/{row.id}"})


@users_router.delete(
    "/users/{user_id}",
    response_model=ErasurePublic,
    status_code=200,
    responses={202: {"model": ErasurePublic, "description": "Erasure running"}},
    summary="Erase a user",
)
async def erase_user(
    user_id: IdPath, caller: CallerDep, request: Request, response: Response
) -> ErasurePublic:
    """Erase everything about this person: their sessions with every message, summary,
    snapshot, memory state, search statistics, idempotency record, job row and queued
    job, the facts drawn from those sessions and the `user/<id>` tier with every version,
    the sessions' shared-memory entries with their references and offloaded tool results,
    and the copies API processes cache. From this call on the user reads as deleted; the
    rows go in batches. Answers the receipt: 200 when done, 202 while a worker finishes
    (`GET /v1/erasures/{id}`). Service and admin keys (an agent key: 403, or 404 for a
    user it may not see)."""
    state = app_state(request.app)
    row = await service.erase_user(state, caller, user_id)
    return answer(service.to_public(row), response)

"""Erasure receipts, and the erasure of an agent's private memory."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from app.auth.deps import CallerDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core.errors import ERROR_RESPONSES
from app.erasure import service
from app.erasure.schemas import ErasureList, ErasurePublic
from app.state import app_state

router = APIRouter(tags=["erasure"], responses=ERROR_RESPONSES)
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

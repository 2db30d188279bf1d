"""Agent profiles (versioned ROM source)."""

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query

from app.auth.deps import CallerDep, DbDep
from app.auth.schemas import AGENT_ID_PATTERN
from app.core.errors import ERROR_RESPONSES
from app.profiles import examples, service
from app.profiles.schemas import ProfilePublic, ProfileUpdate

router = APIRouter(tags=["profiles"], responses=ERROR_RESPONSES)
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


@router.put(
    "/agents/{agent_id}/profile",
    response_model=ProfilePublic,
    summary="Publish a new agent profile version",
)
async def put_agent_profile(
    agent_id: AgentPath,
    body: Annotated[ProfileUpdate, Body(openapi_examples=examples.PROFILE)],
    db: DbDep,
    caller: CallerDep,
) -> ProfilePublic:
    """Publish a new profile version; only sessions created afterwards use it."""
    conn = db
    return service.to_public(await service.publish(conn, caller, agent_id, body))


@router.get(
    "/agents/{agent_id}/profile", response_model=ProfilePublic, summary="Get an agent profile"
)
async def get_agent_profile(
    agent_id: AgentPath,
    db: DbDep,
    caller: CallerDep,
    version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> ProfilePublic:
    """The latest profile version (or ``version``)."""
    conn = db
    return service.to_public(await service.get(conn, caller, agent_id, version))

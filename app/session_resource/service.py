"""A session's lifecycle: its creation (the agent profile's ROM and defaults, then the
other domains' create hooks), its changes and its end."""

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from pydantic import ValidationError

from app.auth.caller import Caller
from app.core.errors import BadRequest, Unprocessable
from app.memory.errors import RomFrozen
from app.memory.policy import MemoryConfig
from app.memory.rom import Rom
from app.models.agent_profile import ProfileRow
from app.models.session import SessionRow
from app.profiles import repository as profiles
from app.session_resource.schemas import (
    SessionConfig,
    SessionCreate,
    SessionPublic,
    SessionUpdate,
)
from app.sessions import repository
from app.sessions.access import SessionNotFound

# Other domains join session creation (e.g. memory freezes the ROM) without this module
# knowing them (assembled in `app.wiring`): each hook gets (the route's connection, the
# session just inserted, the ROM its creation resolved).
CreateHook = Callable[[asyncpg.Connection, SessionRow, Rom], Awaitable[None]]
# ... and the end of a session (`status: ended`), after its commit (facts flush their
# extraction): each hook gets the ended session.
EndHook = Callable[[SessionRow], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class SessionHooks:
    """The hooks of a session's creation and end (a part of the app's state, joined in
    `app.wiring`)."""

    created: tuple[CreateHook, ...]
    ended: tuple[EndHook, ...]


async def ended(session: SessionRow, hooks: Sequence[EndHook]) -> None:
    """Run the session-ended hooks (after the commit that ended `session`)."""
    for hook in hooks:
        await hook(session)


def session_config(session: SessionRow) -> SessionConfig:
    return SessionConfig.model_validate(session.config or {})


def to_public(session: SessionRow) -> SessionPublic:
    cfg = session_config(session)
    return SessionPublic(
        id=session.id,
        agent_id=session.agent_id,
        user_id=session.user_id,
        config=cfg,
        metadata=session.meta or {},
        message_count=session.last_seq,
        message_tokens=session.message_tokens,
        budget=MemoryConfig.from_stored(session.config).budget,
        created_at=session.created_at,
        updated_at=session.updated_at,
        status="ended" if session.status == "ended" else "active",
        ended_at=session.ended_at,
    )


def resolve_agent(caller: Caller, requested: str | None) -> str:
    if caller.role == "agent":
        caller.require_agent_access(requested)
        assert caller.agent_id is not None
        return caller.agent_id
    agent = requested or caller.agent_id
    if not agent:
        raise BadRequest(
            "Name the session's agent with agent_id or X-Agent-Id.", code="agent_required"
        )
    return agent


def with_profile_defaults(config: dict[str, Any], profile: ProfileRow | None) -> dict[str, Any]:
    """A new session's config with its agent profile's defaults: the profile's `facts`
    unless the session set its own, and its `audit` unless the session set it."""
    if profile is not None and profile.facts and not config.get("facts"):
        config = {**config, "facts": profile.facts}
    if profile is not None and profile.audit is not None and config.get("audit") is None:
        # record every context build's manifest
        config = {**config, "audit": profile.audit}
    return config


async def create(
    conn: asyncpg.Connection,
    caller: Caller,
    body: SessionCreate,
    *,
    on_created: Sequence[CreateHook],
) -> SessionRow:
    """Insert the session, then run the create hooks (memory's state references the row).
    Its ROM is the inline one, else its agent profile's current version, whose `facts` and
    `audit` are then the defaults of the session's config (an inline ROM reads no
    profile)."""
    agent_id = resolve_agent(caller, body.agent_id)
    config = body.config.model_dump()
    if body.rom is not None:
        rom = Rom.inline(body.rom)
    else:
        profile = await profiles.latest(conn, caller.tenant_id, agent_id)
        rom = Rom.of_profile(profile)
        config = with_profile_defaults(config, profile)
    session = await repository.insert(
        conn,
        tenant_id=caller.tenant_id,
        session_id=uuid.uuid4(),
        agent_id=agent_id,
        user_id=body.user_id,
        config=config,
        meta=body.metadata,
        now=datetime.now(UTC),
    )
    for hook in on_created:
        await hook(conn, session, rom)
    return session


async def update(conn: asyncpg.Connection, session: SessionRow, body: SessionUpdate) -> SessionRow:
    """Apply the change to the session as it is now (its row locked, so a concurrent change
    is not lost); the row as stored, its counters as the appends left them."""
    if "rom" in body.model_fields_set:
        raise RomFrozen(
            "A session's ROM is frozen at creation; start a new session to use another ROM."
        )
    current = await repository.get(conn, session.tenant_id, session.id, lock=True)
    if current is None:  # erased since it was read
        raise SessionNotFound()
    config = current.config
    if body.config is not None:
        merged: dict[str, Any] = {**(current.config or {}), **body.config}
        try:
            config = SessionConfig.model_validate(merged).model_dump()
        except ValidationError as exc:
            raise Unprocessable(
                "The config is not valid.",
                details=[
                    {"loc": ["body", "config", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                    for e in exc.errors()
                ],
            ) from exc
    meta = current.meta if body.metadata is None else body.metadata
    status, ended_at = current.status, current.ended_at
    if body.status is not None and body.status != current.status:
        # ending flushes the fact extraction (the router, after commit)
        status = body.status
        ended_at = datetime.now(UTC) if body.status == "ended" else None
    updated = await repository.update(
        conn,
        session.tenant_id,
        session.id,
        config=config,
        meta=meta,
        status=status,
        ended_at=ended_at,
        updated_at=datetime.now(UTC),
    )
    if updated is None:
        raise SessionNotFound()
    return updated

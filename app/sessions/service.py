"""Session lifecycle."""

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.caller import Caller
from app.core.errors import BadRequest, Unprocessable
from app.memory.errors import RomFrozen
from app.memory.policy import MemoryConfig
from app.models import Session
from app.sessions import repository
from app.sessions.schemas import SessionConfig, SessionCreate, SessionPublic, SessionUpdate

# Other domains join session creation (e.g. memory freezes the ROM) without this module
# knowing them (assembled in `app.wiring`): each hook gets (db, caller, session, body).
CreateHook = Callable[[AsyncSession, Caller, Session, SessionCreate], Awaitable[None]]
# ... and the end of a session (`status: ended`), after its commit (facts flush their
# extraction): each hook gets the ended session.
EndHook = Callable[[Session], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class SessionHooks:
    """The hooks of a session's creation and end (a part of the app's state, joined in
    `app.wiring`)."""

    created: tuple[CreateHook, ...]
    ended: tuple[EndHook, ...]


async def ended(session: Session, hooks: Sequence[EndHook]) -> None:
    """Run the session-ended hooks (after the commit that ended `session`)."""
    for hook in hooks:
        await hook(session)


def session_config(session: Session) -> SessionConfig:
    return SessionConfig.model_validate(session.config or {})


def to_public(session: Session) -> SessionPublic:
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


async def create(
    db: AsyncSession, caller: Caller, body: SessionCreate, *, on_created: Sequence[CreateHook]
) -> Session:
    agent_id = resolve_agent(caller, body.agent_id)
    session = Session(
        id=uuid.uuid4(),
        tenant_id=caller.tenant_id,
        agent_id=agent_id,
        user_id=body.user_id,
        config=body.config.model_dump(),
        meta=body.metadata,
    )
    await repository.add(db, session)
    for hook in on_created:
        await hook(db, caller, session, body)
    return session


async def update(db: AsyncSession, session: Session, body: SessionUpdate) -> Session:
    if "rom" in body.model_fields_set:
        raise RomFrozen(
            "A session's ROM is frozen at creation; start a new session to use another ROM."
        )
    if body.config is not None:
        merged: dict[str, Any] = {**(session.config or {}), **body.config}
        try:
            session.config = SessionConfig.model_validate(merged).model_dump()
        except ValidationError as exc:
            raise Unprocessable(
                "The config is not valid.",
                details=[
                    {"loc": ["body", "config", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                    for e in exc.errors()
                ],
            ) from exc
    if body.metadata is not None:
        session.meta = body.metadata
    if body.status is not None and body.status != session.status:
        # issue 37: ending flushes the fact extraction (the router, after commit)
        session.status = body.status
        session.ended_at = datetime.now(UTC) if body.status == "ended" else None
    session.updated_at = datetime.now(UTC)
    await db.flush()
    return session

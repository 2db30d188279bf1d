"""Asking for an erasure: the tombstone in one transaction, then the deletion (in the
request for small subjects, else by a worker job) — `app.erasure.policy` has the design.

Who may erase (decisions where the issue is silent):
- a user: service and admin keys of the tenant. An agent key gets 404 for a user it may
  not see (`app.users.access`) and 403 `erasure_forbidden` for one it may: erasing a person
  reaches other agents' sessions with them. A user with nothing stored is 404.
- a session: whoever may see it (`DELETE /v1/sessions/{id}`, as before).
- an agent's private memory (its `agent` knowledge tier and shared-memory namespace): its
  own agent key, and service / admin keys; another agent's key is 403 `agent_mismatch`.
Asking again while an erasure of the same subject runs answers that erasure's receipt.
"""

from __future__ import annotations

import functools
import logging
import uuid

import asyncpg

from app.auth.caller import Caller
from app.core.config import Settings
from app.core.errors import Forbidden, NotFound
from app.core.queue import enqueue
from app.erasure import policy, runner
from app.erasure import repository as repo
from app.erasure.schemas import ErasurePublic
from app.models.erasure import ErasureRow
from app.sessions.access import SessionNotFound
from app.state import AppState
from app.users import access as users_access

log = logging.getLogger("loom.erasure")

ERASE_JOB = "erase"


class ErasureNotFound(NotFound):
    code = "erasure_not_found"

    def __init__(self) -> None:
        super().__init__("No such erasure.")


@functools.lru_cache(maxsize=8)
def _key(secret: str | None, admin: str | None, dsn: str | None) -> bytes:
    return policy.derive_key(secret, admin, dsn)


def hmac_key(settings: Settings) -> bytes:
    secret = settings.erasure_secret.get_secret_value() if settings.erasure_secret else None
    admin = settings.admin_key.get_secret_value() if settings.admin_key else None
    return _key(secret, admin, settings.database_url)


def erase_job_id(erasure_id: uuid.UUID | str) -> str:
    return f"erase:{erasure_id}"


def to_public(row: ErasureRow) -> ErasurePublic:
    return ErasurePublic(
        erasure_id=row.id,
        kind=row.kind,  # type: ignore[arg-type]
        status=row.status,  # type: ignore[arg-type]
        counts=policy.receipt_counts(row.counts),
        requested_by=row.requested_by,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


async def _new(
    conn: asyncpg.Connection, state: AppState, caller: Caller, kind: str, subject: str
) -> uuid.UUID:
    """A running erasure of `subject`, asked by `caller`: its id."""
    erasure_id = uuid.uuid4()
    await repo.insert(
        conn,
        caller.tenant_id,
        erasure_id,
        kind,
        subject,
        policy.subject_hash(hmac_key(state.settings), caller.tenant_id, kind, subject),
        caller.key_id,
        caller.role,
    )
    return erasure_id


def _deps(state: AppState) -> runner.Deps:
    return runner.deps_from(
        state.settings, runner.pool_transaction(state.db_connection), state.redis
    )


async def _carry_out(
    state: AppState, tenant_id: uuid.UUID, erasure_id: uuid.UUID, messages: int
) -> ErasureRow | None:
    """Erase now (small subjects), else queue the job; the sweep covers a failed enqueue."""
    if policy.runs_inline(messages, state.settings.erasure_inline_messages):
        try:
            return await runner.run(_deps(state), tenant_id, erasure_id)
        except Exception as exc:  # the worker finishes it (same erasure, same receipt)
            log.warning("erasure %s continues in the worker: %s", erasure_id, type(exc).__name__)
    await enqueue(
        state.queue, ERASE_JOB, str(tenant_id), str(erasure_id), _job_id=erase_job_id(erasure_id)
    )
    return None


async def _current(state: AppState, tenant_id: uuid.UUID, erasure_id: uuid.UUID) -> ErasureRow:
    async with state.connection() as conn:
        row = await repo.get(conn, tenant_id, erasure_id)
    assert row is not None
    return row


async def erase_user(state: AppState, caller: Caller, user_id: str) -> ErasureRow:
    if caller.role == "agent":
        async with state.db_connection() as conn:
            await users_access.require_visible(conn, caller, user_id)
        raise Forbidden(
            "Erasing a user needs a service key: it reaches every agent's sessions with them.",
            code="erasure_forbidden",
        )
    async with state.connection() as conn, conn.transaction():
        await repo.lock_subject(conn, policy.lock_key(caller.tenant_id, "user", user_id))
        running = await repo.running_for(conn, caller.tenant_id, "user", user_id)
        if running is not None:
            return running
        erasure_id = await _new(conn, state, caller, "user", user_id)
        sessions, messages = await repo.tombstone_user_sessions(
            conn, caller.tenant_id, user_id, erasure_id
        )
        if not sessions and not await repo.tier_size(conn, caller.tenant_id, "user", user_id):
            raise users_access.UserNotFound()  # rolls the erasure back
    done = await _carry_out(state, caller.tenant_id, erasure_id, messages)
    return done or await _current(state, caller.tenant_id, erasure_id)


async def erase_session(state: AppState, caller: Caller, session_id: uuid.UUID) -> ErasureRow:
    """The caller may see the session (checked by the route's loader)."""
    async with state.connection() as conn, conn.transaction():
        erasure_id = await _new(conn, state, caller, "session", str(session_id))
        messages = await repo.tombstone_session(conn, caller.tenant_id, session_id, erasure_id)
        if messages is None:
            raise SessionNotFound()
    done = await _carry_out(state, caller.tenant_id, erasure_id, messages)
    return done or await _current(state, caller.tenant_id, erasure_id)


async def erase_agent_memory(state: AppState, caller: Caller, agent_id: str) -> ErasureRow:
    caller.require_agent_access(agent_id)
    async with state.connection() as conn, conn.transaction():
        await repo.lock_subject(conn, policy.lock_key(caller.tenant_id, "agent", agent_id))
        running = await repo.running_for(conn, caller.tenant_id, "agent", agent_id)
        if running is not None:
            return running
        erasure_id = await _new(conn, state, caller, "agent", agent_id)
        size = await repo.tier_size(
            conn, caller.tenant_id, "agent", agent_id
        ) + await repo.agent_entries(conn, caller.tenant_id, agent_id)
    done = await _carry_out(state, caller.tenant_id, erasure_id, size)
    return done or await _current(state, caller.tenant_id, erasure_id)


async def get_receipt(state: AppState, caller: Caller, erasure_id: uuid.UUID) -> ErasurePublic:
    """Service and admin keys read their tenant's receipts; an agent key the ones it asked
    for (any other: 404)."""
    async with state.connection() as conn:
        row = await repo.get(conn, caller.tenant_id, erasure_id)
    if row is None or (caller.role == "agent" and row.requested_by != caller.key_id):
        raise ErasureNotFound()
    return to_public(row)


async def find(
    state: AppState, caller: Caller, subjects: list[tuple[str, str]], limit: int
) -> list[ErasurePublic]:
    """The tenant's receipts, newest first; with subjects, those whose kind and keyed hash
    match every one of them (so more than one matches nothing)."""
    caller.require_role("service", "admin")
    if len(subjects) > 1:
        return []
    key = hmac_key(state.settings)
    async with state.connection() as conn:
        if subjects:
            kind, subject = subjects[0]
            rows = await repo.by_hash(
                conn,
                caller.tenant_id,
                policy.subject_hash(key, caller.tenant_id, kind, subject),
                limit=limit,
            )
            rows = [r for r in rows if r.kind == kind]
        else:
            rows = await repo.latest(conn, caller.tenant_id, limit=limit)
    return [to_public(r) for r in rows]

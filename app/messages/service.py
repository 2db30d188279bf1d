"""Appending and reading messages."""

import asyncio
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic_core import PydanticSerializationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.caller import Caller
from app.core.errors import Conflict, PayloadTooLarge, Unprocessable
from app.messages import repository
from app.messages.canonical import CanonicalMessage, MessageShapeError, canonicalise
from app.messages.schemas import MessagePublic, MessagesAppend, MessagesAppended
from app.models import IdempotencyRecord, Message
from app.sessions.access import SessionNotFound, visible_session


@dataclass(frozen=True)
class AppendedBatch:
    """What an append wrote, for hooks that run after it (still inside the transaction)."""

    tenant_id: uuid.UUID
    session_id: uuid.UUID
    agent_id: str
    first_seq: int
    last_seq: int
    messages: list[MessagePublic]


# Hooks let other domains join the append without this module knowing them (assembled
# in `app.wiring`): before may rewrite canonical messages (e.g. offload a large tool result
# to shared memory); after sees what was written (e.g. schedule compression after commit).
BeforeAppend = Callable[[AsyncSession, Caller, uuid.UUID, list[CanonicalMessage]],
                        Awaitable[None]]
AfterAppend = Callable[[AsyncSession, Caller, AppendedBatch], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class AppendHooks:
    before: tuple[BeforeAppend, ...] = ()
    after: tuple[AfterAppend, ...] = ()


def to_public(m: Message) -> MessagePublic:
    return MessagePublic(session_id=m.session_id, seq=m.seq, role=m.role, content=m.content,
                         tool_calls=m.tool_calls, tool_use_id=m.tool_use_id,
                         is_error=m.is_error, name=m.name, token_count=m.token_count,
                         metadata=m.meta or {}, created_at=m.created_at)


# Bodies at least this big are measured and token-counted in a worker thread, so a large
# append never stalls the event loop (tiktoken releases the GIL while it encodes).
LARGE_BODY_BYTES = 256 * 1024


def check_sizes(body: MessagesAppend, max_message_bytes: int) -> None:
    """413 `message_too_large` for the first message whose JSON is over the limit."""
    for i, m in enumerate(body.messages):
        try:
            size = len(m.__pydantic_serializer__.to_json(m, exclude_none=True))
        except PydanticSerializationError:  # e.g. lone surrogates (refused later, as 422)
            size = len(json.dumps(m.model_dump(exclude_none=True), ensure_ascii=False)
                       .encode("utf-8", "surrogatepass"))
        if size > max_message_bytes:
            raise PayloadTooLarge(
                f"Message {i} is {size} bytes; at most {max_message_bytes} per message "
                "(large tool results belong in shared memory).", code="message_too_large",
                details=[{"loc": ["body", "messages", i], "size_bytes": size,
                          "max_bytes": max_message_bytes}])


def _token_counts(canonical: list[CanonicalMessage]) -> list[int]:
    return [m.token_count() for m in canonical]


def _canonical(body: MessagesAppend) -> list[CanonicalMessage]:
    out: list[CanonicalMessage] = []
    for i, m in enumerate(body.messages):
        try:
            out.extend(canonicalise(m.model_dump(exclude_none=True), i))
        except MessageShapeError as exc:
            raise Unprocessable(str(exc), code=exc.kind if exc.kind != "message_shape" else None,
                                details=[{"loc": exc.loc, "msg": str(exc),
                                          "type": exc.kind}]) from exc
    return out


def request_hash(body: MessagesAppend) -> str:
    raw = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


async def append(db: AsyncSession, caller: Caller, session_id: uuid.UUID, body: MessagesAppend,
                 *, idempotency_key: str | None, max_messages: int,
                 max_message_bytes: int | None = None, large: bool = False,
                 hooks: AppendHooks) -> MessagesAppended:
    """Append in one transaction. A retried Idempotency-Key returns the first result.

    `large`: the request body is big, so measuring and token counting run off the loop.
    """
    if len(body.messages) > max_messages:
        raise PayloadTooLarge(f"At most {max_messages} messages per request.",
                              code="too_many_messages")
    if max_message_bytes is not None:
        if large:
            await asyncio.to_thread(check_sizes, body, max_message_bytes)
        else:
            check_sizes(body, max_message_bytes)
    if idempotency_key is not None:
        # Serialise with other appends to this session before looking for the first result.
        locked = await repository.lock_session(db, caller.tenant_id, session_id)
        visible_session(caller, locked)
        record = await repository.get_idempotent(db, caller.tenant_id, session_id,
                                                 idempotency_key)
        if record is not None:
            if record.request_hash != request_hash(body):
                raise Conflict("This Idempotency-Key was used with a different request.",
                               code="idempotency_key_reused")
            replay = MessagesAppended.model_validate(record.response)
            replay.replayed = True
            return replay
    canonical = _canonical(body)
    for before in hooks.before:
        await before(db, caller, session_id, canonical)
    counts = (await asyncio.to_thread(_token_counts, canonical) if large
              else _token_counts(canonical))
    reserved = await repository.reserve_seqs(db, caller.tenant_id, session_id, len(canonical),
                                             sum(counts))
    if reserved is None:
        raise SessionNotFound()
    first_seq, agent_id, ts_config = reserved
    if not caller.can_see_agent(agent_id):
        raise SessionNotFound()
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for offset, (m, tokens) in enumerate(zip(canonical, counts, strict=True)):
        rows.append({"session_id": session_id, "seq": first_seq + offset,
                     "tenant_id": caller.tenant_id, "role": m.role, "content": m.content,
                     "tool_calls": m.tool_calls, "tool_use_id": m.tool_use_id,
                     "is_error": m.is_error, "name": m.name, "text": m.text,
                     "token_count": tokens, "metadata": m.metadata, "created_at": now,
                     "ts_config": ts_config})
    await repository.insert_many(db, rows)
    public = [MessagePublic(session_id=session_id, seq=r["seq"], role=r["role"],
                            content=r["content"], tool_calls=r["tool_calls"],
                            tool_use_id=r["tool_use_id"], is_error=r["is_error"], name=r["name"],
                            token_count=r["token_count"], metadata=r["metadata"] or {},
                            created_at=now) for r in rows]
    result = MessagesAppended(messages=public, last_seq=first_seq + len(rows) - 1)
    if idempotency_key is not None:
        await repository.save_idempotent(db, IdempotencyRecord(
            tenant_id=caller.tenant_id, session_id=session_id, key=idempotency_key,
            request_hash=request_hash(body), status_code=201,
            response=result.model_dump(mode="json")))
    batch = AppendedBatch(caller.tenant_id, session_id, agent_id, first_seq, result.last_seq,
                          public)
    for after in hooks.after:
        await after(db, caller, batch)
    return result


async def read_page(db: AsyncSession, caller: Caller, session_id: uuid.UUID, *, after_seq: int,
                    limit: int) -> list[Message]:
    return await repository.page(db, caller.tenant_id, session_id, after_seq=after_seq,
                                 limit=limit)

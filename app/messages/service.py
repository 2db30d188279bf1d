"""Appending and reading messages."""

import asyncio
import hashlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import asyncpg
from pydantic_core import PydanticSerializationError

from app.auth.caller import Caller
from app.core import tracing
from app.core.config import Settings
from app.core.errors import Conflict, PayloadTooLarge, Unprocessable
from app.messages import repository
from app.messages.canonical import CanonicalMessage, MessageShapeError, canonicalise
from app.messages.hooks import AppendedBatch, AppendHooks, AppendTx, Defer
from app.messages.repository import NewMessage
from app.messages.schemas import (
    MAX_CLOCK_SKEW,
    MessagePublic,
    MessagesAppend,
    MessagesAppended,
)
from app.models.message import StoredMessage
from app.sessions.access import SessionNotFound

log = logging.getLogger("loom.messages")


def to_public(m: StoredMessage) -> MessagePublic:
    return MessagePublic(
        session_id=m.session_id,
        seq=m.seq,
        role=m.role,
        content=m.content,
        tool_calls=m.tool_calls,
        tool_use_id=m.tool_use_id,
        is_error=m.is_error,
        name=m.name,
        token_count=m.token_count,
        metadata=m.meta or {},
        created_at=m.created_at,
    )


# Bodies at least this big are measured and token-counted in a worker thread, so a large
# append never stalls the event loop (tiktoken releases the GIL while it encodes): counting
# costs about 80 us per 150-word message, 2 ms for a batch of 20, against about 0.1 ms
# for the hand-off to the thread.
LARGE_BODY_BYTES = 16 * 1024


def check_sizes(body: MessagesAppend, max_message_bytes: int) -> None:
    """413 `message_too_large` for the first message whose JSON is over the limit."""
    for i, m in enumerate(body.messages):
        try:
            size = len(m.__pydantic_serializer__.to_json(m, exclude_none=True))
        except PydanticSerializationError:  # e.g. lone surrogates (refused later, as 422)
            # the same JSON by the standard library: times as text, surrogates kept as
            # they are (`canonicalise` refuses them with a 422 naming the field)
            size = len(
                json.dumps(
                    m.model_dump(mode="python", exclude_none=True),
                    ensure_ascii=False,
                    default=str,
                ).encode("utf-8", "surrogatepass")
            )
        if size > max_message_bytes:
            raise PayloadTooLarge(
                f"Message {i} is {size} bytes; at most {max_message_bytes} per message "
                "(large tool results belong in shared memory).",
                code="message_too_large",
                details=[
                    {
                        "loc": ["body", "messages", i],
                        "size_bytes": size,
                        "max_bytes": max_message_bytes,
                    }
                ],
            )


def check_created_at(body: MessagesAppend, now: datetime) -> None:
    """422 `created_at_in_future` for the first message more than MAX_CLOCK_SKEW ahead of
    `now` (a client's clock may run a little fast; history is not written in advance)."""
    latest = now + MAX_CLOCK_SKEW
    for i, m in enumerate(body.messages):
        if m.created_at is not None and m.created_at > latest:
            msg = (
                f"created_at {m.created_at.isoformat()} is more than "
                f"{int(MAX_CLOCK_SKEW.total_seconds()) // 60} minutes after the server's "
                f"clock ({now.isoformat()})."
            )
            raise Unprocessable(
                f"Message {i}: {msg}",
                code="created_at_in_future",
                details=[
                    {
                        "loc": ["body", "messages", i, "created_at"],
                        "msg": msg,
                        "type": "created_at_in_future",
                    }
                ],
            )


def _texts_and_counts(canonical: list[CanonicalMessage]) -> list[tuple[str, int]]:
    return [m.text_and_tokens() for m in canonical]


def _canonical(body: MessagesAppend) -> list[CanonicalMessage]:
    out: list[CanonicalMessage] = []
    for i, m in enumerate(body.messages):
        try:
            canonical = canonicalise(m.model_dump(exclude_none=True), i)
        except MessageShapeError as exc:
            raise Unprocessable(
                str(exc),
                code=exc.kind if exc.kind != "message_shape" else None,
                details=[{"loc": exc.loc, "msg": str(exc), "type": exc.kind}],
            ) from exc
        for c in canonical:  # e.g. each tool result of an Anthropic user message
            c.created_at = m.created_at
        out.extend(canonical)
    return out


def request_hash(body: MessagesAppend) -> str:
    data = body.model_dump(mode="json")
    for m in data["messages"]:  # as before created_at existed, so stored keys still match
        if m["created_at"] is None:
            del m["created_at"]
    raw = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Stores:
    """Where an append writes: a connection of the hot paths' pool."""

    connection: Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


async def append(
    stores: Stores,
    caller: Caller,
    session_id: uuid.UUID,
    body: MessagesAppend,
    *,
    idempotency_key: str | None,
    max_messages: int,
    max_message_bytes: int | None = None,
    large: bool = False,
    hooks: AppendHooks,
    defer: Defer | None = None,
) -> MessagesAppended:
    """Append a batch atomically. A retried Idempotency-Key returns the first result.

    One path, on one connection of the pool (`_append_on`): the batch is one statement
    (`repository.append_rows`: seqs, rows, counters and the pressure row in one round trip),
    its own transaction when nothing else is written with it; with an Idempotency-Key or a
    hook that applies, that statement, the hooks (given the same connection) and the key's
    record commit in one transaction.
    `large`: the request body is big, so measuring and token counting run off the loop.

    The pressure follow-up (enqueue a compression, decided from the append's own row) runs
    once the batch is committed: handed to `defer` when given (the REST route runs it after
    its response), else awaited. Deferring is safe because the follow-up is best-effort
    anyway: were it lost (the process stops first, Redis is down), the worker's cron pass
    finds the session (changed since its last pass, busy, no job queued) and enqueues it.
    """
    if len(body.messages) > max_messages:
        raise PayloadTooLarge(
            f"At most {max_messages} messages per request.", code="too_many_messages"
        )
    if max_message_bytes is not None:
        if large:
            await asyncio.to_thread(check_sizes, body, max_message_bytes)
        else:
            check_sizes(body, max_message_bytes)
    check_created_at(body, datetime.now(UTC))
    canonical = _canonical(body)
    # a memory operation of the GenAI conventions when tracing is on (app.core.tracing)
    with tracing.memory_span(
        "update_memory", session_id, store_kind="session", records=body.messages
    ):
        async with stores.connection() as conn:
            result, committed, follow_up = await _append_on(
                conn, caller, session_id, body, canonical, idempotency_key, large, hooks
            )
        for run in committed:  # what the hooks left for after the commit (e.g. publish)
            await _never_fails(run)()
        await _committed(follow_up, defer)
    return result


async def _committed(follow_up: Callable[[], Awaitable[None]] | None, defer: Defer | None) -> None:
    """Run the pressure follow-up of a committed append: handed to `defer`, or now."""
    if follow_up is None:
        return
    if defer is not None:
        defer(_never_fails(follow_up))
    else:
        await _never_fails(follow_up)()


def _never_fails(follow_up: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        try:
            await follow_up()
        except Exception:  # a post-commit side effect must never fail the request
            log.exception("after-append follow-up failed")

    return run


_T = TypeVar("_T")


class _Parts(Protocol):
    def __getitem__(self, kind: type[_T], /) -> _T: ...


class App(Protocol):
    """What `append_as` takes of the started app (`app.state.AppState` is one)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def parts(self) -> _Parts: ...
    def connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]: ...


async def append_as(
    state: App,
    caller: Caller,
    session_id: uuid.UUID,
    body: MessagesAppend,
    *,
    idempotency_key: str | None,
    body_bytes: int,
    defer: Defer | None = None,
) -> MessagesAppended:
    """`append` with the app's stores, hooks and limits: what `POST .../messages` and the
    MCP `append_messages` tool run. `body_bytes`: the size of the request that carried it."""
    settings = state.settings
    return await append(
        Stores(state.connection),
        caller,
        session_id,
        body,
        hooks=state.parts[AppendHooks],
        idempotency_key=idempotency_key,
        max_messages=settings.max_messages_per_request,
        max_message_bytes=settings.max_message_bytes,
        large=body_bytes >= LARGE_BODY_BYTES,
        defer=defer,
    )


def _agent_filter(caller: Caller) -> str | None:
    """Agent keys append only to their own agent's sessions (others: 404)."""
    return caller.agent_id if caller.role == "agent" else None


async def _rows(canonical: list[CanonicalMessage], large: bool) -> list[NewMessage]:
    """The rows to store: token counts, and the time now where no created_at was given."""
    counted = (
        await asyncio.to_thread(_texts_and_counts, canonical)
        if large
        else _texts_and_counts(canonical)
    )
    now = datetime.now(UTC)
    return [
        NewMessage(
            m.role,
            m.content,
            m.tool_calls,
            m.tool_use_id,
            m.is_error,
            m.name,
            text,
            tokens,
            m.metadata,
            m.created_at or now,
        )
        for m, (text, tokens) in zip(canonical, counted, strict=True)
    ]


async def _write(
    conn: asyncpg.Connection, caller: Caller, session_id: uuid.UUID, rows: list[NewMessage]
) -> tuple[MessagesAppended, AppendedBatch, Mapping[str, Any]]:
    """Append `rows` (`repository.append_rows`): the response, the batch for the hooks and
    the pressure row; 404 when the session is not the caller's to append to."""
    written = await repository.append_rows(
        conn, caller.tenant_id, session_id, _agent_filter(caller), rows
    )
    if written is None:
        raise SessionNotFound()
    last_seq = int(written["last_seq"])
    first_seq = last_seq - len(rows) + 1
    public = [
        MessagePublic(
            session_id=session_id,
            seq=first_seq + i,
            role=r.role,
            content=r.content,
            tool_calls=r.tool_calls,
            tool_use_id=r.tool_use_id,
            is_error=r.is_error,
            name=r.name,
            token_count=r.token_count,
            metadata=r.metadata or {},
            created_at=r.created_at,
        )
        for i, r in enumerate(rows)
    ]
    result = MessagesAppended(messages=public, last_seq=last_seq)
    batch = AppendedBatch(
        caller.tenant_id, session_id, written["agent_id"], first_seq, last_seq, public
    )
    return result, batch, written


def _pressure_follow_up(
    hooks: AppendHooks, batch: AppendedBatch, written: Mapping[str, Any]
) -> Callable[[], Awaitable[None]] | None:
    if hooks.on_pressure is None or written["l1_start_seq"] is None:
        return None  # a session without memory state has nothing to compress yet
    return hooks.on_pressure(batch, written)


class _KeyTaken(Exception):
    """Another request with the same Idempotency-Key committed first (rolls back ours)."""


async def _append_on(
    conn: asyncpg.Connection,
    caller: Caller,
    session_id: uuid.UUID,
    body: MessagesAppend,
    canonical: list[CanonicalMessage],
    idempotency_key: str | None,
    large: bool,
    hooks: AppendHooks,
) -> tuple[
    MessagesAppended,
    list[Callable[[], Awaitable[None]]],
    Callable[[], Awaitable[None]] | None,
]:
    """The append on `conn`: the result, what the hooks left to run once committed, and
    the pressure follow-up.

    With an Idempotency-Key, the key's record is read first (`repository.read_idempotent`:
    a committed record is final, a replay needs no lock); without one, the append and the
    record commit in one transaction, and a concurrent request with the same key that
    committed first makes ours roll back (hooks' writes included) and replay its result.
    Before hooks run after the session row is locked (visible to the caller: else 404),
    after hooks once the rows are written, all on `conn` in the same transaction."""
    before = [h for h in hooks.before if h.applies(canonical)]
    alone = (
        idempotency_key is None
        and not before
        and not any(h.applies(canonical) for h in hooks.after)
    )
    agent = _agent_filter(caller)
    body_hash = request_hash(body) if idempotency_key is not None else ""
    rows: list[NewMessage] | None = None
    for _ in range(2):
        if idempotency_key is not None:
            found = await repository.read_idempotent(
                conn, caller.tenant_id, session_id, agent, idempotency_key
            )
            if found is None:
                raise SessionNotFound()
            if found["request_hash"] is not None:
                if found["request_hash"] != body_hash:
                    raise Conflict(
                        "This Idempotency-Key was used with a different request.",
                        code="idempotency_key_reused",
                    )
                replay = MessagesAppended.model_validate(found["response"])
                replay.replayed = True
                return replay, [], None
        if rows is None and not before:  # counted outside the transaction (before hooks may
            rows = await _rows(canonical, large)  # rewrite the messages: counted after them)
        tx = AppendTx(conn)
        try:
            async with nullcontext() if alone else conn.transaction():
                if before:
                    # serialise with other appends to this session, and never let a hook
                    # write for a session the caller cannot see
                    if not await repository.lock_session(conn, caller.tenant_id, session_id, agent):
                        raise SessionNotFound()
                    for hook in before:
                        await hook.run(tx, caller, session_id, canonical)
                written_rows = rows if rows is not None else await _rows(canonical, large)
                result, batch, written = await _write(conn, caller, session_id, written_rows)
                if idempotency_key is not None and not await repository.save_idempotent(
                    conn,
                    caller.tenant_id,
                    session_id,
                    idempotency_key,
                    body_hash,
                    201,
                    result.model_dump(mode="json"),
                ):
                    raise _KeyTaken()
                for after in hooks.after:  # asked again: a before hook may have rewritten
                    if after.applies(canonical):
                        await after.run(tx, caller, batch)
        except _KeyTaken:
            continue  # rolled back: replay the first result
        return result, tx.on_commit, _pressure_follow_up(hooks, batch, written)
    raise RuntimeError("the Idempotency-Key's record vanished")  # records are never deleted


async def read_page(
    conn: asyncpg.Connection,
    caller: Caller,
    session_id: uuid.UUID,
    *,
    after_seq: int,
    limit: int,
) -> list[StoredMessage]:
    """A page of the history (on the route's connection: the session's lookup ran on it)."""
    return await repository.page(
        conn,
        caller.tenant_id,
        session_id,
        after_seq=after_seq,
        limit=limit,
    )

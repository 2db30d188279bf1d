"""Messages: append (idempotent on request) and read the full history (the swap)."""

import uuid
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Body, Header, Query, Request, Response

from app.auth.deps import CallerDep, DbDep
from app.core.db import read_only
from app.core.errors import ERROR_RESPONSES
from app.core.limits import BODY_BYTES_SCOPE_KEY
from app.core.pagination import (
    CursorQuery,
    decode_cursor,
    fetch_limit,
    page,
)
from app.messages import examples, service
from app.messages.schemas import MessageList, MessagesAppend, MessagesAppended
from app.sessions.deps import SessionDep
from app.state import app_state

router = APIRouter(tags=["messages"], responses=ERROR_RESPONSES)


@router.post(
    "/sessions/{session_id}/messages",
    status_code=201,
    response_model=MessagesAppended,
    summary="Append messages to a session",
    responses={
        200: {
            "model": MessagesAppended,
            "description": (
                "A replay: this Idempotency-Key's first result (`replayed: true`); "
                "nothing was appended."
            ),
        }
    },
)
async def append_messages(
    session_id: uuid.UUID,
    body: Annotated[MessagesAppend, Body(openapi_examples=examples.APPEND)],
    caller: CallerDep,
    request: Request,
    response: Response,
    background: BackgroundTasks,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> MessagesAppended:
    """Append one or more messages in one transaction.

    With `Idempotency-Key`, a retry of the same request returns the first result (200,
    `replayed: true`) and appends nothing; the same key with a different body is 409.
    A message over `LOOM_MAX_MESSAGE_BYTES` (its JSON) is 413 `message_too_large`; the
    whole request is bounded by `LOOM_MAX_REQUEST_BYTES` (413 `payload_too_large`).
    """
    result = await service.append_as(
        app_state(request.app),
        caller,
        session_id,
        body,
        idempotency_key=idempotency_key,
        body_bytes=request.scope.get(BODY_BYTES_SCOPE_KEY, 0),
        defer=background.add_task,
    )  # after the response
    if result.replayed:
        response.status_code = 200
    return result


@router.get(
    "/sessions/{session_id}/messages",
    response_model=MessageList,
    summary="Read a session's full history",
)
@read_only
async def list_messages(
    session: SessionDep,
    db: DbDep,
    caller: CallerDep,
    after_seq: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    offset: Annotated[
        int | None, Query(ge=0, le=2**63 - 1, description="Skip this many oldest messages.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: CursorQuery = None,
) -> MessageList:
    """The full history, oldest first, by `after_seq`, `offset` or `cursor`."""
    start = 0
    data = decode_cursor(cursor, {"after_seq": int})
    if data is not None:
        start = data["after_seq"]
    elif after_seq is not None:
        start = after_seq
    elif offset is not None:
        start = offset  # seqs start at 1 and have no gaps, so offset n = after seq n
    rows = await service.read_page(
        db,
        caller,
        session.id,
        after_seq=start,
        limit=fetch_limit(limit),
    )
    shown, nxt = page(rows, limit, lambda m: {"after_seq": m.seq})
    return MessageList(items=[service.to_public(m) for m in shown], next_cursor=nxt)

"""Conversation tools: search, recall, append, and the built context of a session.

Search and context run the REST requests' code (`app.search.requests`,
`app.context.service`); recall and clear run the built-in session tools' handlers
(`app.tools.conversation`); append runs `app.messages.service.append_as`.
"""

import uuid
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from app.auth.schemas import AGENT_ID_PATTERN
from app.context import render
from app.context import service as context_service
from app.context.schemas import ContextRequest, RecallInput
from app.core.db import transaction
from app.core.errors import Unprocessable
from app.core.limits import BODY_BYTES_SCOPE_KEY
from app.core.pagination import INT64_MAX
from app.core.strict import JsonAwareDatetime
from app.mcp.calls import Call, call_of, doc, ok
from app.mcp.registry import ToolSpec
from app.messages import service as messages_service
from app.messages.schemas import MessageIn, MessagesAppend
from app.search import requests as search_requests
from app.search.deps import search_env_for
from app.search.schemas import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_QUERY_LENGTH,
    SearchCreate,
    SessionSearchCreate,
    TimeRange,
)
from app.sessions.deps import get_session_row
from app.tools import conversation as builtin
from app.tools.registry import ToolContext, ToolHandler

SessionId = Annotated[
    uuid.UUID,
    Field(
        description=(
            "The id of one of your sessions (conversations). Another agent's or tenant's session "
            "is `session_not_found`."
        )
    ),
]


async def search_memory(
    ctx: Context,
    query: Annotated[
        str,
        Field(
            max_length=MAX_QUERY_LENGTH,
            description=(
                "What to look for, in plain words (names, topics, decisions). Words are stemmed "
                "and OR-ed; no query syntax."
            ),
        ),
    ],
    session_id: Annotated[
        uuid.UUID | None,
        Field(
            description=("Search only this session. Omit to search every session of your agent.")
        ),
    ] = None,
    limit: Annotated[
        int, Field(ge=1, le=MAX_LIMIT, description="How many results.")
    ] = DEFAULT_LIMIT,
    rerank: Annotated[bool, Field(description=doc(SessionSearchCreate, "rerank"))] = True,
    ranking: Annotated[
        Literal["conversation", "message"], Field(description=doc(TimeRange, "ranking"))
    ] = "conversation",
    after: Annotated[JsonAwareDatetime | None, Field(description=doc(TimeRange, "after"))] = None,
    before: Annotated[JsonAwareDatetime | None, Field(description=doc(TimeRange, "before"))] = None,
    promote: Annotated[
        bool,
        Field(
            description=(
                "With session_id: also put the results into that session's context for the next "
                "turns (`over_budget` when they would not fit; nothing is promoted then)."
            )
        ),
    ] = False,
    user_id: Annotated[
        str | None,
        Field(
            pattern=AGENT_ID_PATTERN,
            description=(
                "Without session_id: search the sessions with this user (the person; an agent key "
                "searches its own agent's of them) instead of all of your agent's."
            ),
        ),
    ] = None,
) -> CallToolResult:
    call = call_of(ctx)
    env = search_env_for(call.state)
    fields: dict[str, Any] = {
        "query": query,
        "limit": limit,
        "rerank": rerank,
        "ranking": ranking,
        "after": after,
        "before": before,
    }
    if session_id is None:
        if promote:
            raise Unprocessable(
                "promote needs session_id: results are promoted into one session's context.",
                code="validation_error",
            )
        scope = {"scope": "user", "user_id": user_id} if user_id else {"scope": "agent"}
        body = SearchCreate.model_validate({**fields, **scope})
        return ok(await search_requests.search_sessions(call.state, env, call.caller, body))
    session_body = SessionSearchCreate.model_validate({**fields, "promote": promote})
    return ok(
        await search_requests.search_session(call.state, env, call.caller, session_id, session_body)
    )


async def _in_session(
    call: Call, session_id: uuid.UUID, handler: ToolHandler, args: dict[str, Any]
) -> Any:
    """Run a built-in session tool in one transaction, on a session the caller may see."""
    async with transaction(call.state.db_connection) as db:
        session = await get_session_row(session_id, db, call.caller)
        return await handler(
            ToolContext(db=db, session=session, caller=call.caller, request=call.request), args
        )


async def recall_conversation(
    ctx: Context,
    session_id: SessionId,
    offset: Annotated[
        int,
        Field(
            ge=0,
            le=INT64_MAX,
            description=(
                "How many of the oldest messages to skip (messages are numbered from 1: offset 20 "
                "starts at message 21)."
            ),
        ),
    ] = 0,
    limit: Annotated[
        int, Field(ge=1, le=builtin.RECALL_MAX, description="How many messages.")
    ] = 20,
    promote: Annotated[
        bool,
        Field(
            description=("Keep the recalled messages in the session's context for the next turns.")
        ),
    ] = False,
) -> CallToolResult:
    return ok(
        await _in_session(
            call_of(ctx),
            session_id,
            builtin.recall_conversation,
            {"offset": offset, "limit": limit, "promote": promote},
        )
    )


async def clear_recalled_context(ctx: Context, session_id: SessionId) -> CallToolResult:
    return ok(await _in_session(call_of(ctx), session_id, builtin.clear_recalled_context, {}))


async def append_messages(
    ctx: Context,
    session_id: SessionId,
    messages: Annotated[
        list[MessageIn],
        Field(
            min_length=1,
            description=(
                "The messages, oldest first: `{role, content}` with role user, assistant, "
                "system or tool; content a string or Anthropic content blocks. OpenAI tool "
                "calls and results "
                "(`tool_calls`, role `tool` with `tool_call_id`) work too."
            ),
        ),
    ],
    idempotency_key: Annotated[
        str | None,
        Field(
            max_length=255,
            description=(
                "Makes a retry safe: the same key again returns the first result and appends "
                "nothing (the same key with other messages is `conflict`)."
            ),
        ),
    ] = None,
) -> CallToolResult:
    call = call_of(ctx)
    result = await messages_service.append_as(
        call.state,
        call.caller,
        session_id,
        MessagesAppend(messages=messages),
        idempotency_key=idempotency_key,
        body_bytes=call.request.scope.get(BODY_BYTES_SCOPE_KEY, 0),
    )
    return ok(result)


async def get_context(
    ctx: Context,
    session_id: SessionId,
    format: Annotated[
        Literal["anthropic", "openai"],
        Field(
            description=(
                "`anthropic`: `system` blocks and `messages` for the Messages API. `openai`: chat "
                "completions `messages` (the system prompt first)."
            )
        ),
    ] = "anthropic",
    recall: Annotated[RecallInput | None, Field(description=doc(ContextRequest, "recall"))] = None,
) -> CallToolResult:
    call = call_of(ctx)
    body = ContextRequest(format=format, recall=recall)
    built, extra, payload = await context_service.build_and_record(
        call.state, call.caller, session_id, body, format
    )
    return ok(render.response(built, format, extra, payload))


_READ = ToolAnnotations(read_only_hint=True)

TOOLS = (
    ToolSpec(
        search_memory,
        (
            "Search your long-term conversation memory: every message of your sessions, or of "
            "one session with session_id, ranked by conversation (a message together with the "
            "turns around it) and reranked by relevance. Use it before answering from memory: "
            "'what did we decide about X', 'when did the user mention Y'. Results carry "
            "session_id and seq; read the turns around one with recall_conversation."
        ),
        ToolAnnotations(read_only_hint=False, destructive_hint=False),
    ),
    ToolSpec(
        recall_conversation,
        (builtin.RECALL_DESCRIPTION + " Takes the session_id of the conversation."),
        ToolAnnotations(read_only_hint=False, destructive_hint=False),
    ),
    ToolSpec(
        clear_recalled_context,
        (
            "Remove every promoted (recalled) message from a session's context, keeping the "
            "history itself; returns how many were removed."
        ),
        ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    ),
    ToolSpec(
        append_messages,
        (
            "Append messages to a session's history, in order (it is the session's memory: "
            "what get_context builds from and search_memory finds). Returns the stored "
            "messages with their seq numbers."
        ),
        ToolAnnotations(read_only_hint=False, destructive_hint=False),
    ),
    ToolSpec(
        get_context,
        (
            "The ready-to-send context of a session, within its token budget: the system "
            "prompt, summaries of older turns, the recent messages and the tools, in Anthropic "
            "or OpenAI shape, with tokens per layer. `recall` also searches the session's "
            "history for its newest user message and puts the best old turns back in."
        ),
        _READ,
    ),
)

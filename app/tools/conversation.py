"""The swap tools: recall_conversation, search_conversation, clear_recalled_context."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.errors import AppError
from app.core.pagination import INT64_MAX
from app.core.strict import JsonAwareDatetime
from app.memory.service import clear_promoted
from app.messages import repository as messages_repository
from app.search import service as search_service
from app.search.deps import search_env_for
from app.search.scope import SearchScope
from app.tools.catalog import ToolCatalog
from app.tools.registry import ToolContext, ToolError, parse_args

RECALL_MAX = 50
# A recalled message is returned whole up to this many characters (the rest is cut and
# flagged) so one huge tool output cannot flood the agent's next turn.
RECALL_TEXT_CHARS = 4000
SEARCH_TEXT_CHARS = 1000


class RecallInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    offset: int = Field(default=0, ge=0, le=INT64_MAX)  # as REST after_seq/offset
    limit: int = Field(default=20, ge=1, le=RECALL_MAX)
    promote: bool = False


class SearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(max_length=10_000)
    limit: int = Field(default=10, ge=1, le=20)
    promote: bool = True
    scope: Literal["session", "agent", "tenant"] = "session"
    after: JsonAwareDatetime | None = None
    before: JsonAwareDatetime | None = None


class ClearInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _text(text: str, limit: int) -> dict[str, Any]:
    if len(text) <= limit:
        return {"text": text}
    return {"text": text[:limit], "truncated": True}


# (also the MCP tool's description, app.mcp.conversation)
RECALL_DESCRIPTION = (
    "Retrieve older messages of this conversation from long-term storage, oldest "
    "first. Messages are numbered from 1 (`seq`); `offset` skips that many, so "
    "offset 20, limit 10 returns messages 21-30. Summaries name the range they cover "
    "(`covers msg:120-135`): use it to recall the exact messages. Set `promote` to "
    "keep the recalled messages in your context for the next turns."
)


async def recall_conversation(ctx: ToolContext, args: dict[str, Any]) -> Any:
    """Messages offset+1 .. offset+limit of this session."""
    data = parse_args(RecallInput, args)
    rows = await messages_repository.page(
        ctx.db,
        ctx.session.tenant_id,
        ctx.session.id,
        after_seq=data.offset,
        limit=data.limit,
    )
    promoted: list[int] = []
    if data.promote and rows:
        promoted = await search_service.promote_seqs(ctx.db, ctx.session, [m.seq for m in rows])
    last = ctx.session.last_seq
    return {
        "messages": [
            {"seq": m.seq, "role": m.role, **_text(m.text or "", RECALL_TEXT_CHARS)} for m in rows
        ],
        "total_messages": last,
        "has_more": bool(rows) and rows[-1].seq < last,
        "promoted_seqs": promoted,
    }


async def search_conversation(ctx: ToolContext, args: dict[str, Any]) -> Any:
    """Swap search from the agent's point of view; promotion refusals are reported."""
    data = parse_args(SearchInput, args)
    session = ctx.session
    if data.scope == "session":
        scope = SearchScope(tenant_id=session.tenant_id, session_id=session.id)
    elif data.scope == "agent":
        scope = SearchScope(tenant_id=session.tenant_id, agent_id=session.agent_id)
    else:
        if ctx.caller.role == "agent":
            raise ToolError("FORBIDDEN", "Agent keys search only their own agent's sessions.")
        scope = SearchScope(tenant_id=session.tenant_id)
    env = search_env_for(ctx.state)
    try:
        outcome = await search_service.search(
            ctx.db,
            scope,
            data.query,
            limit=data.limit,
            rerank=True,
            llm=env.llm,
            cache=env.rerank_cache,
            options=env.options,
            after=data.after,
            before=data.before,
        )
    except AppError:
        raise
    except Exception as exc:
        raise ToolError("SEARCH_FAILED", "The search could not be run.") from exc
    result: dict[str, Any] = {
        "results": [
            {
                "session_id": str(h.message.session_id),
                "seq": h.message.seq,
                "role": h.message.role,
                **_text(h.message.text, SEARCH_TEXT_CHARS),
                "created_at": _iso(h.message.created_at),
                "bm25_score": round(h.bm25_score, 6),
                "rerank_score": h.rerank_score,
            }
            for h in outcome.hits
        ],
        "reranked": outcome.reranked,
        "promoted_seqs": [],
    }
    if data.promote and outcome.hits:
        try:
            async with ctx.db.transaction():  # a savepoint in the route's transaction
                result["promoted_seqs"] = await search_service.promote_hits(
                    ctx.db, session, outcome.hits
                )
        except AppError as exc:
            # The agent still gets the results; it learns why they were not promoted.
            result["promote_error"] = {"code": str(exc.code).upper(), "message": exc.message}
    return result


def _iso(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else value


async def clear_recalled_context(ctx: ToolContext, args: dict[str, Any]) -> Any:
    """Drop every promoted message of this session."""
    parse_args(ClearInput, args)

    return {"cleared": int(await clear_promoted(ctx.db, ctx.session))}


__all__ = ["recall_conversation", "search_conversation", "clear_recalled_context"]


def register(catalog: ToolCatalog) -> None:
    """This module's tools (`app.tools.built_in.catalog`)."""
    catalog.register_tool(
        "recall_conversation",
        {
            "description": RECALL_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": INT64_MAX,
                        "default": 0,
                        "description": "How many of the oldest messages to skip.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": RECALL_MAX,
                        "default": 20,
                    },
                    "promote": {"type": "boolean", "default": False},
                },
                "additionalProperties": False,
            },
        },
    )
    catalog.register_tool(
        "search_conversation",
        {
            "description": (
                "Search the full history of this conversation (or all conversations of this agent "
                "or tenant) for messages about a topic. Keyword search with stemming that ranks a "
                "message together with the turns around it, reranked by relevance; `after` and "
                "`before` limit the messages' times. By default the results from this conversation "
                "are promoted into your context; use clear_recalled_context to drop them."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for, in plain words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 10},
                    "promote": {"type": "boolean", "default": True},
                    "scope": {
                        "type": "string",
                        "enum": ["session", "agent", "tenant"],
                        "default": "session",
                    },
                    "after": {
                        "type": "string",
                        "format": "date-time",
                        "description": (
                            "Only messages from this time on (RFC 3339, with a timezone)."
                        ),
                    },
                    "before": {
                        "type": "string",
                        "format": "date-time",
                        "description": "Only messages before this time.",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    )
    catalog.register_tool(
        "clear_recalled_context",
        {
            "description": "Remove every promoted (recalled) message from your context; returns "
            "how many were removed.",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    )
    catalog.register_handler("recall_conversation", recall_conversation)
    catalog.register_handler("search_conversation", search_conversation)
    catalog.register_handler("clear_recalled_context", clear_recalled_context)

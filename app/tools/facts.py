"""The facts tools: search_facts and forget_fact, for the session's agent.

A tool call acts for the session's agent (its `agent` tier), whatever key runs it: the
caller may see the session, so it may see what its agent may see. The default scope is
the session's `config.facts.scope` (else `agent`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.auth.caller import Caller
from app.facts import service as facts_service
from app.facts.policy import FactsConfig
from app.facts.schemas import FactForget, FactSearch
from app.knowledge.versions import actor_of
from app.tools.catalog import ToolCatalog
from app.tools.registry import ToolContext, parse_args

SEARCH_DESCRIPTION = (
    "Search the durable facts remembered from earlier conversations (preferences, personal "
    "details, decisions...) for ones about a topic. Only facts still valid are returned "
    "unless include_invalidated is true. Scope: `agent` (yours, the default), `global`, "
    "`task/<id>` or `project/<id>`."
)
FORGET_DESCRIPTION = (
    "Forget a remembered fact that is wrong or no longer true: it is marked invalid from now "
    "on (kept in its history with your reason) and no longer shown."
)


def _as_session_agent(ctx: ToolContext) -> Caller:
    return dataclasses.replace(ctx.caller, agent_id=ctx.session.agent_id)


async def search_facts(ctx: ToolContext, args: dict[str, Any]) -> Any:
    default = FactsConfig.from_stored((ctx.session.config or {}).get("facts")).scope
    if default == "user":  # the session's user (its agent's tier without one: fact_scope)
        user_id = ctx.session.user_id
        default = f"user/{user_id}" if user_id else "agent"
    body = parse_args(FactSearch, {"scope": default, **args})
    found = await facts_service.search_facts(ctx.db, _as_session_agent(ctx), body)
    return {
        "facts": [
            {
                "id": str(f.id),
                "text": f.text,
                "scope": f.scope,
                "importance": f.importance,
                "tags": f.tags,
                "valid_from": f.valid_from.isoformat() if f.valid_from else None,
                "invalid_at": f.invalid_at.isoformat() if f.invalid_at else None,
            }
            for f in found.items
        ]
    }


async def forget_fact(ctx: ToolContext, args: dict[str, Any]) -> Any:
    body = parse_args(FactForget, args)
    caller = _as_session_agent(ctx)
    item = await facts_service.forget_fact(
        ctx.db, caller, body.id, body.reason, actor_of(caller, "tool")
    )
    return {
        "forgotten": str(item.id),
        "invalid_at": item.invalid_at.isoformat() if item.invalid_at else None,
        "version": item.version,
    }


def register(catalog: ToolCatalog) -> None:
    """This module's tools (`app.tools.built_in.catalog`)."""
    catalog.register_tool(
        "search_facts",
        {
            "description": SEARCH_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 2000,
                        "description": "What the facts should be about, in plain words.",
                    },
                    "scope": {
                        "type": "string",
                        "description": "agent, global, task/<id> or "
                        "project/<id>; default: the session's fact scope.",
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                    "include_invalidated": {"type": "boolean", "default": False},
                    "as_of": {
                        "type": "string",
                        "format": "date-time",
                        "description": ("What was true at this time (ISO 8601), instead of now."),
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    )
    catalog.register_tool(
        "forget_fact",
        {
            "description": FORGET_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "format": "uuid", "description": "The fact's id."},
                    "reason": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 1000,
                        "description": "Why it is no longer true.",
                    },
                },
                "required": ["id", "reason"],
                "additionalProperties": False,
            },
        },
    )
    catalog.register_handler("search_facts", search_facts)
    catalog.register_handler("forget_fact", forget_fact)

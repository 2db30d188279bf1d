"""Session context blocks "knowledge" and "learned" (registered with app.context.blocks).

A session opts in through ``config.knowledge`` (SessionKnowledgeConfig): naming a
project and/or task adds a knowledge block built from a context package;
``learned: true`` adds the agent's active learned version. Each block is
limited to its share of the session budget (``share``, ``learned_share``) and
to the ``budget_tokens`` the context builder offers, and its final text is
counted with the tokenizer, so it is counted in the budget like every layer.
Sessions that configure neither cost no query at all.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from app.context.blocks import ContextBlock, OpenDb
from app.core.config import get_settings
from app.core.tokens import count_text
from app.knowledge import packages, repository
from app.knowledge.render import learned_block
from app.knowledge.schemas import SessionKnowledgeConfig
from app.memory.policy import MemoryConfig
from app.models.session import SessionRow

SessionLike = SessionRow  # what the context build reads (app.memory.repository.read)


def knowledge_config(session_row: SessionLike) -> SessionKnowledgeConfig | None:
    """The session's knowledge config, or None when it has none (or an invalid one)."""
    raw: Any = (session_row.config or {}).get("knowledge")
    if not raw:
        return None
    try:
        return SessionKnowledgeConfig.model_validate(raw)
    except ValidationError:
        return None


def _session_budget(session_row: SessionLike) -> int:
    return MemoryConfig.from_stored(session_row.config).budget


async def knowledge_provider(
    open_db: OpenDb,
    session_row: SessionLike,
    budget_tokens: int,
    newest_user: str | None = None,
    *,
    as_of: datetime | None = None,
    query: str | None = None,
) -> ContextBlock | None:
    """The "knowledge" block: a context package of the session's task/project/global."""
    cfg = knowledge_config(session_row)
    if cfg is None or not (cfg.project_id or cfg.task_id):
        return None
    limit = min(budget_tokens, math.floor(_session_budget(session_row) * cfg.share))
    async with open_db() as db:
        found = await packages.knowledge_block(
            db,
            session_row.tenant_id,
            task_id=cfg.task_id,
            project_id=cfg.project_id,
            include_global=cfg.include_global,
            budget=limit,
            shares=packages.shares_of(cfg.shares),
            head_tail=cfg.head_tail,
            max_candidates=get_settings().knowledge_max_candidates,
        )
    if not found:
        return None
    text, header, rows = found
    sources = tuple(
        {
            "kind": "memory_item",
            "id": str(r.id),
            "version": r.version,
            "tier": tier,
            "importance": r.importance,
        }
        for tier, r in rows
    )
    return ContextBlock(
        name="knowledge",
        text=text,
        token_count=count_text(text),
        sources=sources,
        replay={"header": header, "limit": limit, "share": cfg.share},
        why=f"{len(sources)} item(s) of the session's knowledge package ({header})",
    )


async def learned_provider(
    open_db: OpenDb,
    session_row: SessionLike,
    budget_tokens: int,
    newest_user: str | None = None,
    *,
    as_of: datetime | None = None,
    query: str | None = None,
) -> ContextBlock | None:
    """The "learned" block: the agent's active learned version, if the session opted in."""
    cfg = knowledge_config(session_row)
    if cfg is None or not cfg.learned:
        return None
    async with open_db() as db:
        conn = db
        row = await repository.get_active_learned(conn, session_row.tenant_id, session_row.agent_id)
    if row is None:
        return None
    limit = min(budget_tokens, math.floor(_session_budget(session_row) * cfg.learned_share))
    text = learned_block(row.version, row.content, limit, count_text)
    if text is None:
        return None
    return ContextBlock(
        name="learned",
        text=text,
        token_count=count_text(text),
        sources=({"kind": "learned", "agent_id": session_row.agent_id, "version": row.version},),
        replay={"limit": limit, "share": cfg.learned_share},
        why=f"The agent's active learned version {row.version}",
    )

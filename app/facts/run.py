"""What every step of an extraction run shares: its dependencies (`Deps`), what it
did so far (`Outcome`), and the session's scope (`fact_scope`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.facts.policy import FactsConfig
from app.knowledge.scopes import Scope, agent_scope, parse_scope, user_scope
from app.llm.client import LLMClient


class LeaseLost(Exception):
    """Another worker took this job over (app/jobs/lease.py)."""


@dataclasses.dataclass
class Outcome:
    batches: int = 0
    messages: int = 0
    added: int = 0
    updated: int = 0
    invalidated: int = 0
    unchanged: int = 0
    history: int = 0
    automatic: int = 0  # superseded by the one-value safety net
    # candidates of the model's answers dropped as irreparable, and repaired
    dropped: int = 0
    repaired: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    watermark: int = 0
    skipped: str | None = None
    # the batch being worked on (first and last seq): what a final failure marks failed
    current: tuple[int, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("current")
        return out


@dataclasses.dataclass(frozen=True)
class Deps:
    sessionmaker: async_sessionmaker[AsyncSession]
    llm: LLMClient | None
    settings: Settings


def fact_scope(cfg: FactsConfig, agent_id: str, user_id: str | None = None) -> Scope:
    """The scope the session's facts live in (`agent` = the session's agent; `user` = the
    session's user, or the agent's tier for a session without a user)."""
    scope = parse_scope(cfg.scope)
    if scope.kind == "user" and scope.id is None:
        return user_scope(user_id) if user_id else agent_scope(agent_id)
    return agent_scope(agent_id) if scope.kind == "agent" else scope

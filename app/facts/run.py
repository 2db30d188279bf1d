"""What every step of an extraction run shares: its dependencies (`Deps`), what it
did so far (`Outcome`), the session's scope (`fact_scope`), and the one way its steps
reach the database (`connected`)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncpg

from app.core.config import Settings
from app.facts.policy import FactsConfig
from app.knowledge.scopes import Scope, agent_scope, parse_scope, user_scope
from app.llm.client import LLMClient

if TYPE_CHECKING:  # the connection opener of the API and the worker alike (`connected`)
    from app.core.db import Connect


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
    connect: Connect
    llm: LLMClient | None
    settings: Settings


@asynccontextmanager
async def connected(connect: Connect, *, commit: bool) -> AsyncIterator[asyncpg.Connection]:
    """A pooled connection in a transaction of its own, for a step of a run, a job's
    bookkeeping or a trigger (the API's pool or the worker's: `connect`). With `commit`,
    what the body wrote commits when it ends without raising; else (and on any error) it
    is rolled back."""
    async with connect() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            yield conn
        except BaseException:
            await tx.rollback()
            raise
        if commit:
            await tx.commit()
        else:
            await tx.rollback()


def fact_scope(cfg: FactsConfig, agent_id: str, user_id: str | None = None) -> Scope:
    """The scope the session's facts live in (`agent` = the session's agent; `user` = the
    session's user, or the agent's tier for a session without a user)."""
    scope = parse_scope(cfg.scope)
    if scope.kind == "user" and scope.id is None:
        return user_scope(user_id) if user_id else agent_scope(agent_id)
    return agent_scope(agent_id) if scope.kind == "agent" else scope

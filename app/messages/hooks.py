"""The append's hooks: what `app.messages` declares, and other domains implement, to join an
append without this package knowing them (they are joined only in `app.wiring`).

Each hook says whether it applies to a batch (pure, from the canonical messages): before
may rewrite canonical messages (e.g. offload a large tool result to shared memory); after
sees what was written (e.g. hold the data references). Both run inside the append's
transaction, on its asyncpg connection (`AppendTx.conn`): what they write commits or rolls
back with the messages, and what must wait for the commit (e.g. publish an event) goes to
`AppendTx.on_commit`. Before hooks run once the session row is locked and found visible
to the caller. A batch no hook applies to (the common case) is appended in one statement,
its own transaction. The pressure hook gets the append's pressure row after the append has
committed.
"""

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from app.auth.caller import Caller
from app.messages.canonical import CanonicalMessage
from app.messages.schemas import MessagePublic

log = logging.getLogger("loom.messages")


@dataclass(frozen=True)
class AppendedBatch:
    """What an append wrote, for hooks that run after it (still inside the transaction)."""

    tenant_id: uuid.UUID
    session_id: uuid.UUID
    agent_id: str
    first_seq: int
    last_seq: int
    messages: list[MessagePublic]


@dataclass(frozen=True, slots=True)
class AppendTx:
    """The append's transaction as its hooks see it: the connection it runs on, and what to
    run once it has committed (never run when it rolls back)."""

    conn: asyncpg.Connection
    on_commit: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BeforeAppend:
    applies: Callable[[list[CanonicalMessage]], bool]
    run: Callable[[AppendTx, Caller, uuid.UUID, list[CanonicalMessage]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class AfterAppend:
    applies: Callable[[list[CanonicalMessage]], bool]
    run: Callable[[AppendTx, Caller, AppendedBatch], Awaitable[None]]


# What to do about memory pressure once the append has committed: given the batch and the
# append's pressure row (`app.messages.repository.append_rows`), the coroutine to run
# (e.g. enqueue compression), or None.
OnPressure = Callable[[AppendedBatch, Mapping[str, Any]], Callable[[], Awaitable[None]] | None]

# Runs a follow-up later: e.g. after the response is sent (a route's background tasks).
Defer = Callable[[Callable[[], Awaitable[None]]], None]


def all_of(*hooks: OnPressure) -> OnPressure:
    """Several after-commit hooks as one: each that applies runs, in order; one that fails
    does not stop the next."""

    def run_all(
        batch: AppendedBatch, row: Mapping[str, Any]
    ) -> Callable[[], Awaitable[None]] | None:
        due = [f for f in (h(batch, row) for h in hooks) if f is not None]
        if not due:
            return None

        async def _each() -> None:
            for f in due:
                try:
                    await f()
                except Exception:
                    log.exception("after-append follow-up failed")

        return _each

    return run_all


@dataclass(frozen=True, slots=True)
class AppendHooks:
    before: tuple[BeforeAppend, ...] = ()
    after: tuple[AfterAppend, ...] = ()
    on_pressure: OnPressure | None = None

"""What every LLM call costs, recorded at one place: the LLM client.

A call site says who a call is for and why, once, with `attributed(purpose=...,
tenant_id=..., session_id=...)` (a context manager) or `attribute(...)` (for the rest of the
current task: a job's or a request's own); the attribution travels in a context variable
to the client, whose `Meter.call` wraps every SDK call: it refuses a call of a tenant whose
daily token budget is spent (`BudgetSpent`, an `LLMError` that is not retryable, so the
caller degrades as it does for any LLM failure), times the call, counts it in Prometheus
(by purpose and model: no tenant label) and queues one ledger row (`app.models.llm_usage`).

The rows are written in batches, off the caller's path: a batch goes when 64 rows wait or
half a second after the first one, on the process's SQLAlchemy engine (`UsageStore`, set by
`app.wiring.meter_llm`); a write that fails is logged and dropped, never the call's
failure. None of the hot paths (context build, append) calls the LLM, so none pays anything.

The budget: input + output tokens of a UTC day. The meter keeps each tenant's budget and
today's spending for `LOOM_USAGE_BUDGET_REFRESH_SECONDS` (read from the ledger, its own
unwritten rows first), adds its own calls as they end, and logs an event (and counts it)
when a tenant's spending crosses 80% and 100% of its budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Protocol

from prometheus_client import Counter

from app.core import tracing
from app.llm.errors import LLMError
from app.models.base import time_ordered_id

log = logging.getLogger("loom.llm.usage")

# what a call was for (the ledger's `purpose`); "facts" calls are named by their tool
PURPOSES = ("summary", "fact_recording", "fact_decision", "facts", "rerank", "other")
_FACT_TOOLS = {"record_facts": "fact_recording", "decide_facts": "fact_decision"}
THRESHOLDS = (0.8, 1.0)
BATCH = 64
FLUSH_AFTER_SECONDS = 0.5

CALLS = Counter(
    "loom_llm_calls", "LLM calls, by purpose, model and outcome.", ["purpose", "model", "outcome"]
)
TOKENS = Counter(
    "loom_llm_tokens",
    "LLM tokens, by purpose, model and direction (input/output).",
    ["purpose", "model", "direction"],
)
REFUSED = Counter(
    "loom_llm_budget_refusals",
    "LLM calls not made because the tenant's daily token budget was spent, by purpose.",
    ["purpose"],
)
CROSSINGS = Counter(
    "loom_llm_budget_crossings",
    "Times a tenant's spending crossed a share of its daily token budget (0.8, 1.0).",
    ["threshold"],
)
LEDGER_DROPPED = Counter("loom_llm_ledger_dropped", "Ledger rows that could not be written.")


@dataclass(frozen=True, slots=True)
class Attribution:
    """Who an LLM call is for and why. `enforce=False`: the caller checked the budget
    itself (a fact extraction waits as a whole, `spent`), so its calls are not refused."""

    purpose: str
    tenant_id: uuid.UUID | None = None
    agent_id: str | None = None
    user_id: str | None = None
    session_id: uuid.UUID | None = None
    enforce: bool = True
    # "budget" once a call under it was refused (a search says why it was not reranked)
    refusals: list[str] = field(default_factory=list, compare=False)

    @property
    def refused(self) -> str | None:
        return self.refusals[-1] if self.refusals else None


_current: ContextVar[Attribution | None] = ContextVar("loom_llm_attribution", default=None)


def current() -> Attribution | None:
    """The attribution of the calls made here now."""
    return _current.get()


@contextlib.contextmanager
def attributed(
    purpose: str,
    tenant_id: uuid.UUID | None = None,
    *,
    agent_id: str | None = None,
    user_id: str | None = None,
    session_id: uuid.UUID | None = None,
    enforce: bool = True,
) -> Iterator[Attribution]:
    """The LLM calls made inside are for this tenant (agent, user, session) and purpose."""
    token = _current.set(Attribution(purpose, tenant_id, agent_id, user_id, session_id, enforce))
    try:
        yield _current.get()  # type: ignore[misc]
    finally:
        _current.reset(token)


def attribute(
    purpose: str,
    tenant_id: uuid.UUID | None = None,
    *,
    session_id: uuid.UUID | None = None,
    enforce: bool = True,
) -> Attribution:
    """`attributed` for the rest of the current task (a job, a request): arq runs each job
    and the server each request in a task of its own, so nothing leaks past it."""
    att = Attribution(purpose, tenant_id, None, None, session_id, enforce)
    _current.set(att)
    return att


class BudgetSpent(LLMError):
    """The tenant's daily token budget is spent: the call was not made."""

    def __init__(self, tenant_id: uuid.UUID) -> None:
        super().__init__("daily token budget spent", retryable=False)
        self.tenant_id = tenant_id


class UsageRow(NamedTuple):
    """One ledger row before it is written (`app.models.llm_usage.LlmUsage`)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    at: datetime
    agent_id: str | None
    user_id: str | None
    session_id: uuid.UUID | None
    purpose: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    latency_ms: int
    outcome: str


class UsageStore(Protocol):
    """Where the ledger lives (`app.usage.repository.LedgerStore`)."""

    async def insert(self, rows: Sequence[UsageRow]) -> None: ...

    async def budget(self, tenant_id: uuid.UUID, since: datetime) -> tuple[int | None, bool, int]:
        """(the tenant's own budget, whether it has one set, its tokens since `since`)."""
        ...


@dataclass(slots=True)
class Call:
    """One metered call: the client tells it the tokens the answer reports."""

    input_tokens: int = 0
    output_tokens: int = 0

    def tokens(self, usage: Any, input_name: str, output_name: str) -> None:
        self.input_tokens = int(getattr(usage, input_name, 0) or 0)
        self.output_tokens = int(getattr(usage, output_name, 0) or 0)


@dataclass(slots=True)
class _Spend:
    budget: int | None
    used: int
    day: datetime
    loaded: float


def day_start(now: datetime) -> datetime:
    """The start of `now`'s UTC day: the budget's period."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def crossed(before: int, after: int, budget: int | None) -> list[float]:
    """The shares of `budget` (80%, 100%) that spending from `before` to `after` crossed."""
    if not budget or budget <= 0:
        return []
    return [t for t in THRESHOLDS if before < t * budget <= after]


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    if isinstance(exc, LLMError) and "timed out" in exc.message:
        return "timeout"
    if isinstance(exc, asyncio.CancelledError | TimeoutError):
        return "cancelled"
    return "error"


@dataclass
class Meter:
    """One per LLM client: meters its calls, keeps the ledger's unwritten rows and the
    tenants' budgets (module doc). Without a store (no database: tests of the client, the
    eval) it only counts."""

    store: UsageStore | None = None
    default_budget: int | None = None
    refresh_seconds: float = 5.0
    pending: list[UsageRow] = field(default_factory=list)
    spends: dict[uuid.UUID, _Spend] = field(default_factory=dict)
    _flusher: asyncio.TimerHandle | None = None
    _writing: asyncio.Task[None] | None = None

    def attach(self, store: UsageStore, *, default_budget: int | None, refresh: float) -> None:
        self.store, self.default_budget, self.refresh_seconds = store, default_budget, refresh

    @contextlib.asynccontextmanager
    async def call(
        self, provider: str, model: str, operation: str, tool: str | None = None
    ) -> AsyncIterator[Call]:
        """Around one SDK call (module doc): refuses it past the budget, meters it."""
        att = _current.get()
        purpose = att.purpose if att is not None else "other"
        if purpose == "facts" and tool in _FACT_TOOLS:
            purpose = _FACT_TOOLS[tool]
        tenant = att.tenant_id if att is not None else None
        if tenant is not None and att is not None and att.enforce and await self.spent(tenant):
            REFUSED.labels(purpose=purpose).inc()
            att.refusals.append("budget")
            raise BudgetSpent(tenant)
        call = Call()
        started = time.perf_counter()
        error: BaseException | None = None
        span = tracing.llm_span(provider, model, operation, purpose)
        try:
            if span is None:
                yield call
            else:
                with span as traced:
                    try:
                        yield call
                    finally:
                        traced.tokens(call)
        except BaseException as exc:
            error = exc
            raise
        finally:
            outcome = _outcome(error)
            CALLS.labels(purpose=purpose, model=model, outcome=outcome).inc()
            if call.input_tokens:
                TOKENS.labels(purpose=purpose, model=model, direction="input").inc(
                    call.input_tokens
                )
            if call.output_tokens:
                TOKENS.labels(purpose=purpose, model=model, direction="output").inc(
                    call.output_tokens
                )
            if tenant is not None and att is not None:
                self._add(
                    UsageRow(
                        time_ordered_id(datetime.now(UTC)),
                        tenant,
                        datetime.now(UTC),
                        att.agent_id,
                        att.user_id,
                        att.session_id,
                        purpose,
                        provider,
                        model[:200],
                        call.input_tokens,
                        call.output_tokens,
                        int((time.perf_counter() - started) * 1000),
                        outcome,
                    )
                )

    # --- the budget ---------------------------------------------------------------------

    async def spent(self, tenant_id: uuid.UUID) -> bool:
        """Whether the tenant's daily token budget is spent (False without a budget)."""
        spend = await self._spend(tenant_id)
        return spend is not None and spend.budget is not None and spend.used >= spend.budget

    async def _spend(self, tenant_id: uuid.UUID) -> _Spend | None:
        if self.store is None:
            return None
        now = datetime.now(UTC)
        day = day_start(now)
        spend = self.spends.get(tenant_id)
        if (
            spend is not None
            and spend.day == day
            and time.monotonic() - spend.loaded < self.refresh_seconds
        ):
            return spend
        try:
            await self.flush()
            own, has_own, used = await self.store.budget(tenant_id, day)
        except Exception as exc:  # the ledger unreadable: spend as if there were no budget
            log.warning("could not read the token budget: %s", type(exc).__name__)
            return spend
        budget = own if has_own else self.default_budget
        spend = _Spend(
            budget if budget is None or budget >= 0 else None, used, day, time.monotonic()
        )
        self.spends[tenant_id] = spend
        return spend

    def forget(self, tenant_id: uuid.UUID) -> None:
        """Read the tenant's budget again at its next call (an admin changed it)."""
        self.spends.pop(tenant_id, None)

    def _count(self, row: UsageRow) -> None:
        spend = self.spends.get(row.tenant_id)
        if spend is None or spend.day != day_start(row.at):
            return
        before = spend.used
        spend.used += row.input_tokens + row.output_tokens
        for share in crossed(before, spend.used, spend.budget):
            CROSSINGS.labels(threshold=str(share)).inc()
            log.warning(
                "tenant %s has spent %d%% of its daily token budget (%d of %s tokens)",
                row.tenant_id,
                int(share * 100),
                spend.used,
                spend.budget,
            )

    # --- the ledger's writes ------------------------------------------------------------

    def _add(self, row: UsageRow) -> None:
        self._count(row)
        if self.store is None:
            return
        self.pending.append(row)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if len(self.pending) >= BATCH:
            self._start_write(loop)
        elif self._flusher is None:
            self._flusher = loop.call_later(FLUSH_AFTER_SECONDS, self._start_write, loop)

    def _start_write(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        if self._writing is None or self._writing.done():
            self._writing = loop.create_task(self._write_all())

    async def _write_all(self) -> None:
        while self.pending and self.store is not None:
            rows, self.pending = self.pending[:BATCH], self.pending[BATCH:]
            try:
                await self.store.insert(rows)
            except Exception as exc:  # never the call's failure: logged and counted
                LEDGER_DROPPED.inc(len(rows))
                log.warning("could not write %d ledger rows: %s", len(rows), type(exc).__name__)

    async def flush(self) -> None:
        """Write every row waiting now (before a report reads the ledger, at shutdown)."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        writing = self._writing
        if writing is not None and not writing.done():
            await asyncio.shield(writing)
        await self._write_all()


def meter_of(llm: Any) -> Meter | None:
    """The meter of an LLM client (None for a client without one, or no client)."""
    meter = getattr(llm, "meter", None)
    return meter if isinstance(meter, Meter) else None


async def spent(
    llm: Any, tenant_id: uuid.UUID, session_id: uuid.UUID | None = None, purpose: str = "facts"
) -> bool:
    """For work that waits as a whole when the budget is spent (fact extraction): sets the
    task's attribution (its calls are not refused one by one) and says whether the
    tenant's budget is spent now."""
    attribute(purpose, tenant_id, session_id=session_id, enforce=False)
    meter = meter_of(llm)
    return meter is not None and await meter.spent(tenant_id)


def next_day(now: datetime) -> datetime:
    """When a spent budget is whole again."""
    return day_start(now) + timedelta(days=1)

"""The connection budget of `serve` (pure: no I/O).

PostgreSQL refuses connections past `max_connections` ("sorry, too many clients"), less
the slots it keeps for superusers (`superuser_reserved_connections`, and on 16+
`reserved_connections`). What is left is split:

- a reserve for migrations, operators and their tools (`LOOM_DB_RESERVE`, 10);
- the worker `serve` supervises, when it runs one: its SQLAlchemy pool, 4 kept and 8 more
  at peaks (`WORKER_CONNECTIONS`);
- the API processes, equally. A process holds the hot paths' asyncpg pool (P connections,
  `LOOM_DB_POOL_SIZE`) and the other routes' SQLAlchemy pool (P // 2, and half that again
  at peaks), so `per_process(P)` = P + P//2 + P//4 (each part at least 1). P is the largest
  that fits the process's share, never more than the setting.

`LOOM_DB_CONNECTIONS` replaces the derived share of the API processes with a number (for
several `serve`s on one database, e.g. compose replicas: give each its part). With
`LOOM_WEB_WORKERS` unset (0) there is one process per CPU this process may use (its
affinity and its cgroup's CPU quota, not the host's count), fewer if the budget holds
fewer; a number of processes that cannot get `MIN_POOL` each is refused before anything
starts. Past its pool a request waits for a connection (`LOOM_DB_POOL_TIMEOUT_SECONDS`),
then answers 503 with Retry-After: the database never sees more than the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.config import WORKER_CONNECTIONS, api_pool_sizes

DEFAULT_RESERVE = 10
MIN_POOL = 2


class PlanError(ValueError):
    """The processes asked for cannot get the connections they need."""


def per_process(pool: int) -> int:
    """Connections one API process may open with an asyncpg pool of `pool` (app.main):
    the pool, the SQLAlchemy engine's `pool // 2` and its overflow, half that again."""
    size, overflow = api_pool_sizes(pool)
    return pool + size + overflow


def cpus(affinity: int, cpu_max: str | None) -> int:
    """The CPUs this process may use: its affinity, capped by a cgroup v2 quota
    (`cpu.max`: "max 100000" is none, "150000 100000" is 1.5, rounded up)."""
    n = max(1, affinity)
    if cpu_max:
        quota, _, period = cpu_max.strip().partition(" ")
        if quota != "max" and period:
            try:
                n = min(n, max(1, math.ceil(int(quota) / int(period))))
            except (ValueError, ZeroDivisionError):
                pass
    return n


@dataclass(frozen=True)
class Server:
    """What the database allows (read from it at start)."""

    max_connections: int
    reserved: int  # superuser_reserved_connections (+ reserved_connections on 16+)


@dataclass(frozen=True)
class Plan:
    processes: int
    pool: int  # LOOM_DB_POOL_SIZE of each process
    worker: int
    reserve: int
    budget: int  # what the API processes may use in all
    server: Server | None  # None: LOOM_DB_CONNECTIONS decided, the server was not asked

    @property
    def api_connections(self) -> int:
        return self.processes * per_process(self.pool)

    def line(self) -> str:
        """The plan in one line, as `serve` says it."""
        each = per_process(self.pool)
        used = f"{self.processes} API process{'es' if self.processes > 1 else ''} x {each}"
        used += f" (pool {self.pool})"
        if self.worker:
            used += f" + worker {self.worker}"
        if self.server is None:
            return f"database connections: {used}, within LOOM_DB_CONNECTIONS={self.budget}"
        total = self.api_connections + self.worker + self.reserve
        allowed = self.server.max_connections - self.server.reserved
        return (
            f"database connections: {used} + reserve {self.reserve} = {total} "
            f"of {allowed} (max_connections {self.server.max_connections}, "
            f"{self.server.reserved} reserved for superusers)"
        )


def plan(
    *,
    server: Server | None,
    processes: int | None,
    cpu_count: int,
    pool_setting: int,
    with_worker: bool,
    reserve: int = DEFAULT_RESERVE,
    connections: int = 0,
) -> Plan:
    """The plan for `processes` API processes (None: one per CPU, fewer if the budget
    holds fewer), or PlanError saying what would not fit and what to change."""
    worker = WORKER_CONNECTIONS if with_worker else 0
    if connections > 0:
        budget = connections
    elif server is not None:
        budget = server.max_connections - server.reserved - reserve - worker
    else:
        raise PlanError("neither LOOM_DB_CONNECTIONS nor the server's max_connections is known")
    smallest = per_process(MIN_POOL)
    n = processes if processes is not None else max(1, min(cpu_count, budget // smallest))
    share = budget // n if n else 0
    if share < smallest:
        source = (
            f"LOOM_DB_CONNECTIONS={connections}"
            if connections > 0
            else (
                f"max_connections {server.max_connections} - {server.reserved} reserved - "
                f"reserve {reserve} - worker {worker}"
                if server is not None
                else "?"
            )
        )
        raise PlanError(
            f"{n} API processes need at least {smallest} database connections each "
            f"({n * smallest}); this service may use {budget} ({source}). Run fewer "
            "processes (--workers / LOOM_WEB_WORKERS), or raise PostgreSQL's "
            "max_connections (or LOOM_DB_CONNECTIONS)."
        )
    pool = max(MIN_POOL, min(pool_setting, share))
    while pool > MIN_POOL and per_process(pool) > share:
        pool -= 1
    return Plan(
        processes=n,
        pool=pool,
        worker=worker,
        reserve=reserve,
        budget=budget,
        server=server if connections <= 0 else None,
    )

"""Every statement the suite runs names its tenant: proven on the partitioned schema.

On a database whose tenant-owned tables are hash-partitioned by `tenant_id`
(`LOOM_PARTITIONS=N`, `app.core.partitions`), a statement that names its tenant is
planned against one partition of each table it reads or writes; one that does not reads
every partition. The recorder logs every statement the app's connections run (asyncpg's
query logger on both pools); `violations` plans each distinct statement with its first
arguments (`EXPLAIN`, custom plans, so the arguments prune as they would at run time) and
returns those that touch more than one partition of a table.

Fan-out by design is listed in `FAN_OUT`: background sweeps that look for work across all
tenants (each row they find is then handled by statements that name its tenant).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from app.core.partitions import TENANT_TABLES, is_partition

_TABLES = re.compile(r"\b(" + "|".join(TENANT_TABLES) + r")\b")
_SKIP = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|SET|RESET|SHOW|SAVEPOINT|RELEASE|LISTEN|"
                   r"UNLISTEN|NOTIFY|DISCARD|DEALLOCATE|EXPLAIN|ANALYZE|VACUUM|CREATE|DROP|"
                   r"ALTER|SELECT pg_advisory)", re.I)

# (marker in the statement, why it may read every partition)
FAN_OUT: tuple[tuple[str, str], ...] = (
    ("loom:fan-out", "a background sweep across tenants (see the statement's comment)"),
)


@dataclass
class Recorder:
    """Distinct statements (by text) with the arguments of their first run."""

    seen: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    hooked: set[int] = field(default_factory=set)

    def log(self, record: Any) -> None:
        query = record.query
        if query not in self.seen and _TABLES.search(query) and not _SKIP.match(query):
            args = record.args or ()
            if isinstance(args, list):  # executemany: the argument tuples of every run
                args = args[0] if args else ()
            self.seen[query] = tuple(args)

    def attach(self, conn: asyncpg.Connection) -> None:
        if id(conn) not in self.hooked:
            self.hooked.add(id(conn))
            conn.add_query_logger(self.log)


def install(recorder: Recorder) -> None:
    """Log every statement of every connection the app opens (`application_name`
    loom-memory: the API's pools and the worker's engine; the tests' own connections are
    left out). Both pools connect through `asyncpg.connect` / `asyncpg.connection.connect`."""
    import asyncpg.connection as module

    original = module.connect

    async def connect(*args: Any, **kwargs: Any) -> Any:
        conn = await original(*args, **kwargs)
        if (kwargs.get("server_settings") or {}).get("application_name") == "loom-memory":
            recorder.attach(conn)
        return conn

    module.connect = connect  # type: ignore[assignment]
    asyncpg.connect = connect  # type: ignore[assignment]


def _partitions(plan: Any, found: dict[str, set[str]]) -> None:
    if isinstance(plan, dict):
        rel = plan.get("Relation Name")
        if isinstance(rel, str) and is_partition(rel):
            found.setdefault(rel.rsplit("_p", 1)[0], set()).add(rel)
        for value in plan.values():
            _partitions(value, found)
    elif isinstance(plan, list):
        for value in plan:
            _partitions(value, found)


async def violations(dsn: str, recorder: Recorder) -> list[str]:
    """The recorded statements that a plan shows reading more than one partition of a
    table: 'table: n partitions' and the statement."""
    conn = await asyncpg.connect(dsn, server_settings={"plan_cache_mode": "force_custom_plan"})
    bad: list[str] = []
    try:
        for query, args in recorder.seen.items():
            if any(marker in query for marker, _ in FAN_OUT):
                continue
            try:
                raw = await conn.fetchval("EXPLAIN (FORMAT JSON) " + query, *args)
            except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:  # e.g. a statement that needs its transaction
                bad.append(f"could not plan ({exc.__class__.__name__}: {exc}):\n{query}")
                continue
            found: dict[str, set[str]] = {}
            _partitions(json.loads(raw), found)
            wide = {t: len(p) for t, p in found.items() if len(p) > 1}
            if wide:
                bad.append(f"{wide}:\n{query}")
    finally:
        await conn.close()
    return bad

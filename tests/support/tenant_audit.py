"""Every statement the suite runs names its tenant: proven on the partitioned schema.

On a database whose tenant-owned tables are hash-partitioned by `tenant_id`
(`LOOM_PARTITIONS=N`, `app.core.partitions`), a statement that names its tenant is
planned against one partition of each table it reads or writes; one that does not reads
every partition. The recorder logs every statement the app's connections run (asyncpg's
query logger on both pools); `violations` plans each distinct statement with its first
arguments (`EXPLAIN`, custom plans, so the arguments prune as they would at run time) and
returns those that touch more than one partition of a table.

Fan-out by design is marked with `app.core.partitions.FAN_OUT`: background sweeps that
look for work across all tenants (what they find is handled by statements naming its
tenant).
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from app.core.partitions import FAN_OUT, TENANT_TABLES, is_partition

_TABLES = re.compile(r"\b(" + "|".join(TENANT_TABLES) + r")\b")
_TENANT = re.compile(r"\btenant_id\b")
# a tenant table read or written: FROM / JOIN / UPDATE / INTO / USING <table>
_REFERENCES = re.compile(
    r"\b(?:FROM|JOIN|UPDATE|INTO|USING)\s+(?:ONLY\s+)?(" + "|".join(TENANT_TABLES) + r")\b", re.I
)
_SKIP = re.compile(
    r"^\s*(BEGIN|COMMIT|ROLLBACK|SET|RESET|SHOW|SAVEPOINT|RELEASE|LISTEN|"
    r"UNLISTEN|NOTIFY|DISCARD|DEALLOCATE|EXPLAIN|ANALYZE|VACUUM|CREATE|DROP|"
    r"ALTER|SELECT pg_advisory)",
    re.I,
)


@dataclass
class Recorder:
    """Distinct statements (by text) with the arguments of their first run."""

    seen: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # the app's connections, held weakly: by id() a closed one's id could come back as
    # one of the tests' own connections, whose statements were then logged as the app's
    hooked: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)

    def log(self, record: Any) -> None:
        query = record.query
        if query not in self.seen and _TABLES.search(query) and not _SKIP.match(query):
            args = record.args or ()
            if isinstance(args, list):  # executemany: the argument tuples of every run
                args = args[0] if args else ()
            self.seen[query] = tuple(args)

    def attach(self, conn: asyncpg.Connection) -> None:
        if conn not in self.hooked:
            self.hooked.add(conn)
            conn.add_query_logger(self.log)


def install(recorder: Recorder, database: str | None = None) -> Callable[[], None]:
    """Log every statement of every connection the app opens (`application_name`
    loom-memory: the API's pools and the worker's engine; the tests' own connections are
    left out), to `database` when given (other tests' own databases may have another
    layout). Both pools connect through `asyncpg.connect` / `asyncpg.connection.connect`;
    asyncpg's query logger sees `Connection.fetch` and the like, and prepared statements
    (SQLAlchemy runs every statement as one) are logged where they run."""
    import asyncpg.connection as module
    from asyncpg.prepared_stmt import PreparedStatement

    original = module.connect
    methods = {
        name: getattr(PreparedStatement, name)
        for name in ("fetch", "fetchrow", "fetchval", "fetchmany", "executemany")
    }

    async def connect(*args: Any, **kwargs: Any) -> Any:
        conn = await original(*args, **kwargs)
        ours = (kwargs.get("server_settings") or {}).get("application_name") == "loom-memory"
        if ours and (database is None or conn._params.database == database):
            recorder.attach(conn)
        return conn

    def logged(name: str, method: Any) -> Any:
        async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self._connection in recorder.hooked:
                recorder.log(
                    _Logged(self.get_query(), [args[0]] if name == "executemany" and args else args)
                )
            return await method(self, *args, **kwargs)

        return run

    def restore() -> None:
        module.connect = original
        asyncpg.connect = original
        for name, method in methods.items():
            setattr(PreparedStatement, name, method)

    module.connect = connect
    asyncpg.connect = connect
    for name, method in methods.items():
        setattr(PreparedStatement, name, logged(name, method))
    return restore


@dataclass
class _Logged:
    query: str
    args: Any


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
            if FAN_OUT in query:  # a background sweep across tenants, on purpose
                continue
            try:
                raw = await conn.fetchval("EXPLAIN (FORMAT JSON) " + query, *args)
            except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                bad.append(f"could not plan ({exc.__class__.__name__}: {exc}):\n{query}")
                continue
            found: dict[str, set[str]] = {}
            _partitions(json.loads(raw), found)
            wide = {t: len(p) for t, p in found.items() if len(p) > 1}
            if wide:
                bad.append(f"{wide}:\n{query}")
            # the plan may prune a table through a join's equality; the SQL must still
            # name the tenant once per table it reads or writes
            tables, named = len(_REFERENCES.findall(query)), len(_TENANT.findall(query))
            if named < tables:
                bad.append(f"names {tables} tenant tables but tenant_id {named} times:\n{query}")
    finally:
        await conn.close()
    return bad


async def explain_one_partition(dsn: str, recorder: Recorder) -> list[str]:
    """Assert that every recorded statement reads or writes one partition of each
    tenant-owned table it scans (and at least one such scan in all); return each
    statement's plan lines that name a partition, for the record."""
    conn = await asyncpg.connect(dsn, server_settings={"plan_cache_mode": "force_custom_plan"})
    lines: list[str] = []
    scanned = 0
    try:
        for query, args in recorder.seen.items():
            found: dict[str, set[str]] = {}
            _partitions(
                json.loads(await conn.fetchval("EXPLAIN (FORMAT JSON) " + query, *args)), found
            )
            assert all(len(p) == 1 for p in found.values()), (found, query)
            scanned += len(found)
            text = [r[0] for r in await conn.fetch("EXPLAIN " + query, *args)]
            first = " ".join(query.split())[:90]
            lines.append(f"{first} ...")
            lines.extend(
                f"    {ln.strip()}"
                for ln in text
                if any(f"{t}_p" in ln for t in found)
                or ln.lstrip().startswith(("Insert on", "Update on", "Delete on"))
            )
    finally:
        await conn.close()
    assert scanned, "no statement read a tenant-owned table"
    return lines

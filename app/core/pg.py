"""The asyncpg pools: the hot paths' (auth, append, context build, shared-memory reads)
and every other route's and the worker's (`app.core.db`), and what they share.

The hot routes run a few fixed statements per request, prepared once per connection and
cached; their pool plans them generically (`pool_server_settings`). The other pool plans
as PostgreSQL chooses. Every domain runs SQL text on these connections (`Params` composes
a statement from parts); SQLAlchemy is the schema's, for the migrations only.

Each pool has the same bounds (`Settings.db_*`): statement timeout on the server, a
client-side timeout a little longer, a bounded wait for a connection and for a connect. It
opens connections on demand (`min_size=0`), so an API process starts while the database is
down and serves 503 until it is back; asyncpg replaces a pooled connection the server has
closed when it is next acquired, and `connection` cuts one that failed mid-statement.
Failures map to statuses like the engine's (`app.core.db_errors`).

A released connection goes back as it is: asyncpg's default reset (`pg_advisory_unlock_all;
CLOSE ALL; UNLISTEN *; RESET ALL`) cost a round trip per request, and nothing that runs on
this pool leaves session state behind. Its statements set planner options and take
advisory locks only for their transaction (`set_config(..., true)`, `SET LOCAL`,
`pg_try_advisory_xact_lock`), and never LISTEN, declare cursors or create temp tables; a
transaction left open is still rolled back (asyncpg does that before any reset), and the
connection's own settings (`create_pool`'s server settings) are set once, at connect. A
test runs every hot path on a one-connection pool and compares the connection with a fresh
one (tests/core/test_pg_release.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from typing import Any

import asyncpg
import orjson

from app.core import deadline
from app.core.config import Settings, libpq_dsn
from app.core.db_errors import is_connection_error
from app.core.jsonlimits import long_integer_possible

# orjson decodes several times faster than the stdlib, but it reads integers beyond 64 bits
# as floats; stored content must come back exactly as it was sent, so a text that may hold
# one (`jsonlimits.long_integer_possible`) is decoded by the stdlib.
# The pool reads json and jsonb in PostgreSQL's binary format, so both take the bytes as
# they come from the server: no UTF-8 decoding into a str for asyncpg, and no encoding
# back for the check (together they cost more than the check itself on non-ASCII text).
JSONB_VERSION = b"\x01"  # the first byte of jsonb's binary format


def loads(raw: str | bytes) -> Any:
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    if long_integer_possible(data):
        return json.loads(raw)
    return orjson.loads(raw)


def dumps(value: Any) -> str:
    """JSON text for a json/jsonb parameter (the stdlib: any int size, surrogates escaped
    so that PostgreSQL refuses them as 422 instead of the encoder failing)."""
    return json.dumps(value, separators=(",", ":"))


def positional(sql: str) -> tuple[str, list[str]]:
    """SQL with `:name` bind parameters (as SQLAlchemy's text() takes it) for asyncpg:
    `$n` placeholders, and the names in their order (casts `::type` are left alone)."""
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"(?<![:\w]):([a-z_][a-z0-9_]*)\b", sub, sql), names


@functools.lru_cache(maxsize=1024)
def _positional_cached(sql: str) -> tuple[str, tuple[str, ...]]:
    text, names = positional(sql)
    return text, tuple(names)


class Params:
    """Bind parameters of a statement composed from parts (a scope's condition, a
    filter, the `readable` rule): each part adds its values and writes the `:name` it got,
    and `sql` numbers them for asyncpg. A value added twice under one hint keeps one name.

        p = Params()
        where = readable_sql(p, tenant_id, agent_id)
        rows = await conn.fetch(*p.sql(f"SELECT ... FROM memory_items m WHERE {where}"))
    """

    __slots__ = ("values",)

    def __init__(self, **values: Any) -> None:
        self.values: dict[str, Any] = dict(values)

    def add(self, value: Any, hint: str = "p") -> str:
        """`:name` for `value` (`hint` in lower case letters, digits and `_`)."""
        if hint in self.values and type(self.values[hint]) is type(value):
            if self.values[hint] == value:
                return f":{hint}"
        name = hint if hint not in self.values else f"{hint}_{len(self.values)}"
        self.values[name] = value
        return f":{name}"

    def sql(self, text: str) -> tuple[Any, ...]:
        """`(statement, *arguments)` for `conn.fetch(*p.sql(...))`."""
        statement, names = _positional_cached(text)
        return (statement, *(self.values[n] for n in names))


def _json_bytes(value: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError("json/jsonb parameters are passed as JSON text")
    return value.encode()


def _jsonb_bytes(value: str) -> bytes:
    return JSONB_VERSION + _json_bytes(value)


def _jsonb_loads(data: bytes) -> Any:
    if data[:1] != JSONB_VERSION:
        raise ValueError(f"unknown jsonb binary format version {data[:1]!r}")
    text = data[1:]
    if long_integer_possible(text):
        return json.loads(text)
    return orjson.loads(text)


# On a Citus coordinator a generic plan of a statement whose tenant is a parameter cannot
# be routed ("could not create distributed plan", the append's first run): there the pool's
# connections plan as PostgreSQL chooses (custom plans, which Citus routes to one shard,
# fast), the one difference from a plain PostgreSQL, set once per connection.
CITUS_SQL = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"

# Whether this process's database is a Citus coordinator, as the first connection of the
# process (this pool's or the engine's, `app.core.db`) found it: a process serves one
# database. The few statements Citus cannot route as they are read it (`on_citus`).
_on_citus: bool | None = None


def on_citus() -> bool:
    """Whether the database is a Citus coordinator (see `_on_citus`)."""
    return bool(_on_citus)


def citus_known() -> bool:
    return _on_citus is not None


def note_citus(value: bool) -> None:
    global _on_citus
    _on_citus = value


async def _init(conn: asyncpg.Connection) -> None:
    # parameters: JSON text, as SQLAlchemy's asyncpg dialect takes them, so one statement
    # runs on either pool whatever the value's Python type; results: decoded
    await conn.set_type_codec(
        "json", encoder=_json_bytes, decoder=loads, schema="pg_catalog", format="binary"
    )
    await conn.set_type_codec(
        "jsonb", encoder=_jsonb_bytes, decoder=_jsonb_loads, schema="pg_catalog", format="binary"
    )
    if not citus_known():
        note_citus(bool(await conn.fetchval(CITUS_SQL)))
    if on_citus():
        await conn.execute("SET plan_cache_mode = auto")


# The client waits this much longer than the server's statement_timeout, so a slow
# statement is cancelled by the server (the connection stays usable) and only a server that
# does not answer at all hits the client-side timeout (the connection is discarded).
CLIENT_TIMEOUT_GRACE = 0.5


def connection_bounds(settings: Settings) -> tuple[dict[str, str], float | None]:
    """The server settings (application name, `statement_timeout`) and the client-side
    command timeout of every connection, this pool's and the SQLAlchemy engine's."""
    statement = settings.db_statement_timeout_seconds
    server = {"application_name": "loom-memory"}
    if not statement:
        return server, None
    server["statement_timeout"] = str(int(statement * 1000))
    return server, statement + CLIENT_TIMEOUT_GRACE


def pool_server_settings(settings: Settings) -> dict[str, str]:
    """The server settings of every connection of this pool (set once, at connect)."""
    server, _ = connection_bounds(settings)
    # The pool runs a few fixed statements, each an index lookup whatever its parameters:
    # a generic plan is right for all of them, and without it PostgreSQL re-plans the
    # context read on every call (its custom plans look cheaper than the generic one),
    # which doubled its round trip (1.0 ms instead of 0.5 ms for a 50-message session).
    server["plan_cache_mode"] = "force_generic_plan"
    # No JIT: none of these statements runs long enough to repay compiling. (asyncpg also
    # turns it off for the session while it introspects a type and restores the value it
    # read, which inside a search's `SET LOCAL jit = off` left it off for good: the
    # connection's settings then depended on its history.)
    server["jit"] = "off"
    return server


async def create_pool(
    url: str, settings: Settings, *, size: int | None = None, generic_plans: bool = True
) -> asyncpg.Pool:
    """A pool of `size` connections (default `LOOM_DB_POOL_SIZE`) of `app.core.db`'s
    connection class. `generic_plans`: the hot paths' pool (see `pool_server_settings`);
    without, PostgreSQL plans as it chooses (the other routes' pool, `app.core.db`)."""
    from app.core.db import LoomConnection

    _, command_timeout = connection_bounds(settings)
    server = pool_server_settings(settings) if generic_plans else connection_bounds(settings)[0]
    if not generic_plans:
        server["jit"] = "off"
    pool = asyncpg.create_pool(
        libpq_dsn(url),
        min_size=0,
        max_size=size or settings.db_pool_size,
        connection_class=LoomConnection,
        init=_init,
        timeout=settings.db_connect_timeout_seconds,
        command_timeout=command_timeout,
        server_settings=server,
        reset=_keep,
        # LOOM_DB_STATEMENT_CACHE=false: unnamed statements, parsed on every run
        statement_cache_size=100 if settings.db_statement_cache else 0,
    )
    return await pool


async def _keep(conn: asyncpg.Connection) -> None:
    """The pool's reset on release: nothing to undo (see the module's docstring)."""


class connection:  # noqa: N801 (used as a function: `async with connection(...) as conn:`)
    """A pooled connection, waiting at most `wait` seconds for one (then 503), and never
    past the request's database deadline (`app.core.deadline`): the body runs under it.

    After a connection-level failure (`is_connection_error`, client-side timeouts of a
    frozen server included) or a cancellation mid-statement the connection is cut before it
    goes back: the pool would otherwise roll back its transaction, waiting on a server that
    may not answer, and the pool opens a fresh one when it is next needed.

    A class rather than a generator, and both waits on one `asyncio.Timeout`
    (`deadline.bounded`) rather than asyncpg's `acquire(timeout=)`, which runs the
    acquisition as a task of its own: every request of the hot paths enters one."""

    __slots__ = ("_bound", "_conn", "_pool", "_wait")

    def __init__(self, pool: asyncpg.Pool, wait: float) -> None:
        self._pool, self._wait = pool, wait

    async def __aenter__(self) -> asyncpg.Connection:
        self._bound = bound = deadline.bounded(self._wait)
        await bound.__aenter__()
        try:
            conn = await self._pool.acquire()
        except BaseException as exc:
            await bound.__aexit__(type(exc), exc, exc.__traceback__)  # TimeoutError if cut
            raise
        bound.hold()
        self._conn = conn
        return conn

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        conn = self._conn
        try:
            try:
                await self._bound.__aexit__(exc_type, exc, tb)  # TimeoutError when it cut
            except BaseException as raised:
                if cut_after(raised):
                    conn.terminate()
                raise
            if exc is not None and cut_after(exc):
                conn.terminate()
        finally:
            await self._pool.release(conn)


def cut_after(exc: BaseException) -> bool:
    """Whether a connection that raised `exc` must be cut rather than go back as it is."""
    return isinstance(exc, asyncio.CancelledError | TimeoutError) or is_connection_error(exc)


async def close(pool: asyncpg.Pool, grace: float = 2.0) -> None:
    """Close the pool, cutting connections still busy after `grace` seconds (a shutdown
    never waits on a frozen server)."""
    try:
        await asyncio.wait_for(pool.close(), grace)
    except TimeoutError:
        pool.terminate()

"""A Citus cluster of the tests' own: a coordinator and two workers on private ports.

Each node is a PostgreSQL 15 data directory under /tmp (`initdb` of the machine's
/usr/lib/postgresql/15, run as the `postgres` user when the tests run as root), with
`shared_preload_libraries = 'citus'`, `wal_level = logical` (shard moves) and durability
off (a test cluster). The Citus build is `/work/shared/vendor/citus/build.sh` (scripts/
test-citus runs it first); a cluster cannot start without it and says so.

`python -m tests.support.citus -- <command...>` starts a cluster, runs the command with
`LOOM_TEST_CITUS` set to the coordinator's admin DSN, and stops the cluster afterwards
(scripts/test-citus runs the API and jobs tests that way). Under `LOOM_TEST_CITUS`,
`database` creates the run's database on every node with the extension and the workers
added, so `loom-memory migrate` on it distributes the schema (`app.core.citus`).

Multi-shard statements are found in the coordinator's log: every database the tests make
has `citus.multi_task_query_log_level = log` and `log_min_error_statement = log`, so each
statement Citus plans as more than one task leaves "multi-task query about to be executed"
followed by its text, with the database and application name in the line's prefix
(`multi_shard_statements`).
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg

PG_BIN = Path(os.environ.get("LOOM_CITUS_PG_BIN", "/usr/lib/postgresql/15/bin"))
CITUS_SO = Path("/usr/lib/postgresql/15/lib/citus.so")
ENV = "LOOM_TEST_CITUS"
LOG_PREFIX = "%m [%p] db=%d,app=%a "
MULTI_TASK = "multi-task query about to be executed"

CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{dir}'
shared_preload_libraries = 'citus'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
max_worker_processes = 32
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
logging_collector = off
log_line_prefix = '{prefix}'
citus.max_cached_conns_per_worker = 4
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    """Run `cmd` as the postgres user when we are root (initdb refuses root)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@dataclass
class Node:
    name: str
    port: int
    data: Path
    log: Path

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


class Cluster:
    """Coordinator + workers, each a PostgreSQL of its own under `root`."""

    def __init__(self, root: Path, workers: int = 2) -> None:
        self.root = root
        names = ["coordinator"] + [f"worker{i + 1}" for i in range(workers)]
        self.nodes = [Node(n, _free_port(), root / n, root / f"{n}.log") for n in names]

    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return self.nodes[1:]

    def start(self) -> None:
        if not CITUS_SO.is_file():
            raise RuntimeError(
                f"{CITUS_SO} is missing: build Citus first "
                "(/work/shared/vendor/citus/build.sh, which scripts/test-citus runs)"
            )
        described = subprocess.run(
            [str(PG_BIN / "postgres"), "--describe-config"], capture_output=True, text=True
        ).stdout
        guarded = any(line.startswith("output_plugin_libraries") for line in described.split("\n"))
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        for node in self.nodes:
            subprocess.run(
                _as_postgres(
                    [
                        str(PG_BIN / "initdb"),
                        "-D",
                        str(node.data),
                        "-U",
                        "postgres",
                        "-A",
                        "trust",
                        "-E",
                        "UTF8",
                        "--locale=C.UTF-8",
                        "--no-sync",
                    ]
                ),
                check=True,
                stdout=subprocess.DEVNULL,
            )
            with open(node.data / "postgresql.conf", "a") as conf:
                conf.write(CONF.format(port=node.port, dir=node.data, prefix=LOG_PREFIX))
                if guarded:
                    # this PostgreSQL build names the logical decoding plugins it allows;
                    # a tenant's isolation (a shard split) decodes with Citus's own
                    conf.write("output_plugin_libraries = 'pgoutput, test_decoding, citus'\n")
        for node in self.nodes:
            subprocess.run(
                _as_postgres(
                    [
                        str(PG_BIN / "pg_ctl"),
                        "-D",
                        str(node.data),
                        "-l",
                        str(node.log),
                        "-w",
                        "-t",
                        "60",
                        "start",
                    ]
                ),
                check=True,
                stdout=subprocess.DEVNULL,
            )

    def stop(self) -> None:
        for node in self.nodes:
            if (node.data / "postmaster.pid").exists():
                subprocess.run(
                    _as_postgres(
                        [
                            str(PG_BIN / "pg_ctl"),
                            "-D",
                            str(node.data),
                            "-m",
                            "immediate",
                            "-w",
                            "stop",
                        ]
                    ),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
        shutil.rmtree(self.root, ignore_errors=True)

    def env(self) -> str:
        """`LOOM_TEST_CITUS`: the coordinator's admin DSN, then each worker's port."""
        return ",".join([self.coordinator.admin_dsn, *(str(w.port) for w in self.workers)])


@contextmanager
def running(workers: int = 2) -> Iterator[Cluster]:
    cluster = Cluster(Path(f"/tmp/loom-citus-{os.getpid()}-{secrets.token_hex(3)}"), workers)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


# --- the run's databases on a cluster (LOOM_TEST_CITUS) ------------------------------


@dataclass(frozen=True)
class Target:
    """The cluster a test process uses: the coordinator's admin DSN and the workers' ports,
    and the coordinator's log (the nodes' data directories are siblings of it)."""

    admin_dsn: str
    worker_ports: tuple[int, ...]

    @classmethod
    def from_env(cls, value: str) -> Target:
        dsn, *ports = value.split(",")
        return cls(dsn, tuple(int(p) for p in ports))

    def node_dsns(self, database: str) -> list[str]:
        base = self.admin_dsn.rsplit("/", 1)[0]
        host = base.rsplit(":", 1)[0]
        return [f"{base}/{database}", *(f"{host}:{p}/{database}" for p in self.worker_ports)]

    def node_admins(self) -> list[str]:
        return [d.rsplit("/", 1)[0] + "/postgres" for d in self.node_dsns("postgres")]

    @property
    def coordinator_port(self) -> int:
        return int(self.admin_dsn.rsplit("/", 1)[0].rsplit(":", 1)[1])


def target() -> Target | None:
    value = os.environ.get(ENV)
    return Target.from_env(value) if value else None


async def create_database(t: Target, name: str) -> None:
    """`name` on every node with the citus extension, the workers added on the
    coordinator, and multi-shard statements logged with their text."""
    for admin in t.node_admins():
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
    dsns = t.node_dsns(name)
    for dsn in dsns:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("CREATE EXTENSION citus")
        finally:
            await conn.close()
    for dsn in dsns:
        await _ssl_on(dsn)
    conn = await asyncpg.connect(dsns[0])
    try:
        await conn.execute(f"SELECT citus_set_coordinator_host('127.0.0.1', {t.coordinator_port})")
        for port in t.worker_ports:
            await conn.execute(f"SELECT citus_add_node('127.0.0.1', {port})")
        await conn.execute(f'ALTER DATABASE "{name}" SET citus.multi_task_query_log_level = log')
        await conn.execute(f'ALTER DATABASE "{name}" SET log_min_error_statement = log')
        # 8 shards over 2 workers: both hold tenants, and migrating a test database is
        # quick (32, Citus's default, costs four times the shard tables)
        await conn.execute(f'ALTER DATABASE "{name}" SET citus.shard_count = 8')
    finally:
        await conn.close()


async def _ssl_on(dsn: str, within: float = 60.0) -> None:
    """Wait until a new connection to the node finds SSL on. The first `CREATE EXTENSION
    citus` of a node without SSL makes a certificate and turns `ssl` on by a configuration
    reload, which the postmaster takes asynchronously; the coordinator connects to its
    workers with `sslmode=require` (`citus.node_conninfo`), so adding a worker before its
    reload fails ("failure on connection marked as essential"): seen on a loaded machine."""
    deadline = time.monotonic() + within
    while True:
        conn = await asyncpg.connect(dsn)
        try:
            if await conn.fetchval("SHOW ssl") == "on":
                return
        finally:
            await conn.close()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{dsn}: ssl still off {within:.0f} s after CREATE EXTENSION citus")
        await asyncio.sleep(0.05)


async def drop_database(t: Target, name: str) -> None:
    for admin in reversed(t.node_admins()):
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


@contextmanager
def database(prefix: str) -> Iterator[str]:
    """A fresh database on the cluster of `LOOM_TEST_CITUS`; yields its coordinator DSN."""
    t = target()
    assert t is not None, f"{ENV} is not set"
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(create_database(t, name))
    try:
        yield t.node_dsns(name)[0]
    finally:
        asyncio.run(drop_database(t, name))


def coordinator_log() -> Path:
    """The coordinator's server log (the run's cluster root holds it)."""
    root = os.environ.get("LOOM_TEST_CITUS_ROOT")
    assert root, "LOOM_TEST_CITUS_ROOT is not set"
    return Path(root) / "coordinator.log"


_LINE = re.compile(r"^\S+ \S+ \S+ \[\d+\] db=(?P<db>[^,]*),app=(?P<app>\S*) (?P<rest>.*)$")


def multi_shard_statements(
    log: Path, database: str, application: str = "loom-memory", start: int = 0
) -> list[str]:
    """The statements of `application` on `database` Citus planned as several tasks, in
    the order they ran, from byte `start` of the coordinator's log."""
    found: list[str] = []
    pending = False
    current: list[str] | None = None
    with open(log, "rb") as f:
        f.seek(start)
        lines = f.read().decode("utf-8", "replace").splitlines()
    for line in lines:
        m = _LINE.match(line)
        if m is None:  # a continuation of the previous line (a multi-line statement)
            if current is not None:
                current.append(line)
            continue
        if current is not None:
            found.append("\n".join(current))
            current = None
        ours = m.group("db") == database and m.group("app") == application
        rest = m.group("rest")
        if ours and MULTI_TASK in rest:
            pending = True
        elif ours and pending and rest.startswith("STATEMENT:"):
            current = [rest.removeprefix("STATEMENT:").strip()]
            pending = False
        elif ours and not rest.startswith(("HINT:", "DETAIL:", "CONTEXT:")):
            pending = False
    if current is not None:
        found.append("\n".join(current))
    return found


def log_size() -> int:
    return coordinator_log().stat().st_size


def main(argv: list[str]) -> int:
    """`python -m tests.support.citus -- cmd...`: run `cmd` with a cluster up."""
    if argv and argv[0] == "--":
        argv = argv[1:]
    # a SIGTERM (a CI's timeout) still stops the cluster: SystemExit runs the cleanup
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    with running() as cluster:
        print(
            f"citus: coordinator :{cluster.coordinator.port}, workers "
            + ", ".join(f":{w.port}" for w in cluster.workers)
            + f" ({time.monotonic() - started:.1f} s to start)",
            flush=True,
        )
        env = dict(os.environ, **{ENV: cluster.env(), "LOOM_TEST_CITUS_ROOT": str(cluster.root)})
        return subprocess.call(argv, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`loom-memory` command line: serve, worker, migrate, openapi, create-key, eval.

`serve` supervises the worker it starts (`Supervised`: restarted with backoff when it
exits), and `worker` itself reconnects when Redis goes away (`workers.settings.run_forever`).
"""

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.core import logs, metrics_dir
from app.core.config import Settings, get_settings
from app.launcher import budget as budget_rules
from app.launcher.embedded_redis import die_with_parent
from app.version import VERSION

log = logging.getLogger("loom")

# what `loom-memory --help` says: for someone running the server, not for its developers
DESCRIPTION = """\
Loom Memory: a memory server for LLM agents (sessions and their context, search, shared
memory, knowledge and facts) over a REST API and MCP.

Start with `loom-memory serve`: it runs the API on http://127.0.0.1:8420 and a background
worker. Without DATABASE_URL and REDIS_URL it starts its own PostgreSQL and Redis in
./.loom and prints an admin key. The API's documentation is at /docs, the console at
/console."""

EPILOG = """\
examples:
  loom-memory serve                         everything on this machine, data in ./.loom
  loom-memory serve --port 9000 --workers 2
  loom-memory create-key --role service --tenant-name acme
  DATABASE_URL=postgresql://user:pass@db/loom loom-memory migrate

Settings come from the environment (DATABASE_URL, REDIS_URL, LOOM_ADMIN_KEY,
LOOM_LLM_PROVIDER...; the repository's .env.example lists them all).
`loom-memory COMMAND --help` says more about a command."""


def _migrate(url: str, *, quick: bool = False) -> str:
    """Migrate to the latest schema; returns the line that says what was done (`quick`:
    no Alembic when the database is at the latest schema already, `migrate.migrate`)."""
    from app.launcher.migrate import migrate

    return migrate(url, quick=quick).line()


class _NoDatabase(Exception):
    """The command has no database to work on (the message says what to set)."""


@contextlib.contextmanager
def _database_url(settings: Settings, *, existing: bool) -> Iterator[str]:
    """DATABASE_URL, or the embedded database of the data directory: joined if a `serve`
    runs on it, else started for the command and stopped afterwards. `existing`: refuse a
    data directory that holds no database yet (instead of creating one)."""
    if settings.database_url:
        yield settings.database_url
        return
    from app.launcher.embedded import EmbeddedStores, has_embedded_db, missing_embedded
    from app.launcher.startup import quiet_store_logs

    data_dir = settings.data_dir.resolve()
    problem = missing_embedded(need_db=True, need_redis=False)
    if problem is None and existing and not has_embedded_db(data_dir):
        problem = (
            f"DATABASE_URL is not set and {data_dir} holds no embedded database: "
            "run `loom-memory serve` there once, or set LOOM_DATA_DIR or "
            "DATABASE_URL"
        )
    if problem:
        raise _NoDatabase(problem)
    quiet_store_logs(data_dir)
    stores = EmbeddedStores(data_dir=data_dir)
    try:
        stores.start(need_db=True, need_redis=False)
        assert stores.database_url
        yield stores.database_url
    finally:
        stores.stop()  # stops PostgreSQL unless a `serve` uses it too


def cmd_migrate(_: argparse.Namespace) -> int:
    """Migrate DATABASE_URL's database or, without it, the embedded one of the data
    directory (created if it does not exist yet; joined if a `serve` runs on it)."""
    settings = get_settings()
    try:
        if settings.database_url and settings.migrate_wait_seconds > 0:
            from app.launcher.migrate import wait_for_database

            wait_for_database(settings.database_url, settings.migrate_wait_seconds)
        with _database_url(settings, existing=False) as url:
            done = _migrate(url)
    except _NoDatabase as exc:
        print(exc, file=sys.stderr)
        return 2
    if settings.database_url:
        print(f"database {done}")
    else:
        print(f"embedded database in {settings.data_dir.resolve()} {done}")
    return 0


def cmd_openapi(args: argparse.Namespace) -> int:
    from app.main import create_app

    doc = create_app(Settings()).openapi()
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    return 0


def cmd_worker(_: argparse.Namespace) -> int:
    """An arq worker that rides out Redis outages (reconnects with backoff) until
    SIGTERM / SIGINT; see `workers.settings.run_forever`."""
    from workers.settings import run_forever

    asyncio.run(run_forever())
    return 0


async def _create_key(url: str, args: argparse.Namespace) -> dict[str, str]:
    from app.auth.service import create_cli_key
    from app.core import pg
    from app.core.config import get_settings

    pool = await pg.create_pool(url, get_settings(), size=1, generic_plans=False)
    try:
        async with pg.connection(pool, 30.0) as conn, conn.transaction():
            tenant, created, secret = await create_cli_key(
                conn,
                role=args.role,
                tenant_id=args.tenant_id,
                tenant_name=args.tenant_name or "default",
                agent_id=args.agent_id,
            )
    finally:
        await pg.close(pool)
    print(f"{'created' if created else 'existing'} tenant {tenant.name!r}", file=sys.stderr)
    return {
        "tenant_id": str(tenant.id),
        "tenant_name": tenant.name,
        "role": args.role,
        "secret": secret,
    }


def cmd_create_key(args: argparse.Namespace) -> int:
    """Create a key in DATABASE_URL's database or, without it, in the embedded one of the
    data directory (joining the PostgreSQL a running `serve` uses, or starting it for the
    command)."""
    from app.core.errors import AppError

    if (args.role == "agent") != bool(args.agent_id):
        print(
            "--agent-id is required for --role agent and refused for the other roles",
            file=sys.stderr,
        )
        return 2
    settings = get_settings()
    try:
        with _database_url(settings, existing=True) as url:
            if not settings.database_url:
                print(f"embedded database in {settings.data_dir.resolve()}", file=sys.stderr)
                if settings.migrate_on_start:
                    _migrate(url)
            out = asyncio.run(_create_key(url, args))
    except _NoDatabase as exc:
        print(exc, file=sys.stderr)
        return 2
    except AppError as exc:
        print(exc.message, file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2))
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _ignore(signum: int, frame: object) -> None:
    pass


class Supervised:
    """A child process `serve` keeps running: when it exits (crash, kill, OOM) it is
    started again after a backoff that doubles from 0.5 s up to
    `LOOM_WORKER_RECONNECT_MAX_SECONDS` (back to 0.5 s after a minute of good health),
    and each exit and restart is logged. `stop()` ends it for good."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], max_backoff: float) -> None:
        self.name, self.argv, self.env, self.max_backoff = name, argv, env, max_backoff
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"supervise-{name}", daemon=True)

    def _spawn(self) -> subprocess.Popen[bytes]:
        # PR_SET_PDEATHSIG fires when the spawning *thread* ends: the watcher thread lives
        # until stop(), like the main thread
        self.proc = subprocess.Popen(self.argv, env=self.env, preexec_fn=die_with_parent)
        self._started = time.monotonic()
        return self.proc

    def start(self) -> None:
        self._thread.start()

    def _watch(self) -> None:
        backoff = 0.5
        with self._lock:
            if self._stopping.is_set():
                return
            self._spawn()
        while True:
            proc = self.proc
            assert proc is not None
            code = proc.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - self._started > 60:
                backoff = 0.5
            log.warning(
                "%s (pid %d) exited with %s; restarting in %.1fs",
                self.name,
                proc.pid,
                code,
                backoff,
            )
            if self._stopping.wait(backoff):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                proc = self._spawn()
                self.restarts += 1
            log.warning("%s restarted (pid %d)", self.name, proc.pid)
            backoff = min(self.max_backoff, backoff * 2)

    def stop(self, timeout: float = 10) -> None:
        with self._lock:
            self._stopping.set()
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._thread.join(timeout=timeout)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity and its cgroup's CPU quota (inside a
    container `os.cpu_count()` is the host's)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 1
    try:
        cpu_max: str | None = Path("/sys/fs/cgroup/cpu.max").read_text()
    except OSError:
        cpu_max = None
    return budget_rules.cpus(affinity, cpu_max)


async def _server_limits(url: str, connect_seconds: float) -> budget_rules.Server:
    import asyncpg

    from app.core.config import libpq_dsn

    conn = await asyncpg.connect(libpq_dsn(url), timeout=connect_seconds)
    try:
        rows = await conn.fetch(
            "SELECT name, setting::int FROM pg_settings WHERE name IN "
            "('max_connections', 'superuser_reserved_connections', 'reserved_connections')"
        )
    finally:
        await conn.close()
    got = {r[0]: r[1] for r in rows}
    return budget_rules.Server(
        max_connections=got["max_connections"],
        reserved=got.get("superuser_reserved_connections", 0) + got.get("reserved_connections", 0),
    )


def connection_plan(
    settings: Settings, flag: int | None, *, with_worker: bool
) -> budget_rules.Plan:
    import asyncpg

    """How many API processes `serve` runs and the pool of each (`app.launcher.budget`):
    --workers, else LOOM_WEB_WORKERS (0: one per usable CPU), within the connections the
    database allows (read from it) or LOOM_DB_CONNECTIONS."""
    requested = flag if flag is not None else settings.web_workers
    server = None
    if settings.db_connections <= 0:
        assert settings.database_url
        try:
            server = asyncio.run(
                _server_limits(settings.database_url, settings.db_connect_timeout_seconds)
            )
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise budget_rules.PlanError(
                f"could not ask the database for its connection limit "
                f"({type(exc).__name__}: {exc}); set LOOM_DB_CONNECTIONS to plan without asking"
            ) from exc
    return budget_rules.plan(
        server=server,
        processes=requested if requested > 0 else None,
        cpu_count=usable_cpus(),
        pool_setting=settings.db_pool_size,
        with_worker=with_worker and settings.run_worker_in_serve,
        reserve=settings.db_reserve,
        connections=settings.db_connections,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.launcher.embedded import EmbeddedStores, bootstrap_admin_key, missing_embedded
    from app.launcher.startup import (
        AnnounceWhenReady,
        Banner,
        CannotStart,
        check_port,
        display_url,
        lock_data_dir,
        quiet_store_logs,
        say,
        uvicorn_log_config,
    )

    settings = get_settings()
    host = args.host or settings.host
    port = args.port or settings.port
    need_db, need_redis = not settings.database_url, not settings.redis_url
    missing = missing_embedded(need_db, need_redis)
    if missing:
        print(missing, file=sys.stderr)
        return 2
    try:  # before anything starts, so a refusal leaves nothing running
        check_port(host, port)
        lock = lock_data_dir(settings.data_dir) if need_db or need_redis else None
    except CannotStart as exc:
        print(exc, file=sys.stderr)
        return 1
    if need_db or need_redis:
        log_file = quiet_store_logs(settings.data_dir)
        if settings.log_file is None:
            # every process serve starts (API, worker) and serve itself write there too
            os.environ["LOOM_LOG_FILE"] = str(log_file)
            get_settings.cache_clear()
            settings = get_settings()
            logs.configure(settings.log_format, settings.log_level, settings.log_file)
    stores = EmbeddedStores(data_dir=settings.data_dir)
    worker: Supervised | None = None
    announcer: AnnounceWhenReady | None = None
    # in the environment before the children start or anything imports prometheus_client
    prometheus_dir = metrics_dir.ServeMetricsDir(settings.metrics_dir)
    try:
        for line in stores.plan(need_db=need_db, need_redis=need_redis):
            say(line)
        stores.start(need_db=need_db, need_redis=need_redis)
        env = dict(os.environ)
        if stores.database_url:
            env["DATABASE_URL"] = os.environ["DATABASE_URL"] = stores.database_url
        if stores.redis_url:
            env["REDIS_URL"] = os.environ["REDIS_URL"] = stores.redis_url
        get_settings.cache_clear()
        settings = get_settings()
        assert settings.database_url
        if settings.migrate_on_start:
            say("migrating the database to the latest schema")
            _migrate(settings.database_url, quick=True)
        try:
            budget = connection_plan(settings, args.workers, with_worker=not args.no_worker)
        except budget_rules.PlanError as exc:
            print(f"cannot start: {exc}", file=sys.stderr)
            return 1
        say(budget.line())
        n = budget.processes
        env["LOOM_DB_POOL_SIZE"] = os.environ["LOOM_DB_POOL_SIZE"] = str(budget.pool)
        get_settings.cache_clear()
        settings = get_settings()
        banner = Banner(
            url=display_url(host, port),
            processes=f"{n} API process{'es' if n > 1 else ''}",
            admin_key_env=settings.admin_key is not None,
            data_dir=settings.data_dir.resolve() if stores.started else None,
        )
        if settings.admin_key is None and stores.started:
            key, created = bootstrap_admin_key(settings.data_dir)
            env["LOOM_ADMIN_KEY"] = os.environ["LOOM_ADMIN_KEY"] = key
            get_settings.cache_clear()
            settings = get_settings()
            banner.admin_key_file = (settings.data_dir / "admin_key").resolve()
            banner.admin_key = key if created else None
        from app.facts.startup import say_once_for_all

        say_once_for_all(settings, env)  # "no LLM configured": once, not once per process
        if settings.run_worker_in_serve and not args.no_worker:
            worker = Supervised(
                "worker",
                [sys.executable, "-m", "app.launcher.cli", "worker"],
                env,
                settings.worker_reconnect_max_seconds,
            )
            worker.start()
            banner.processes += " and a worker"
        from app.core.http_errors import EnvelopeHTTPProtocol

        say(f"starting {banner.processes}; the address follows once the API answers")
        announcer = AnnounceWhenReady(banner)
        announcer.start()
        common: dict[str, Any] = {
            "host": host,
            "port": port,
            "log_level": settings.log_level,
            "log_config": (
                logs.dict_config("json", settings.log_level, settings.log_file)
                if settings.log_format == "json"
                else uvicorn_log_config(settings.log_level, settings.log_file)
            ),
            "access_log": False,
            "http": EnvelopeHTTPProtocol,
        }
        # uvicorn shuts down gracefully on SIGTERM, then raises the signal again with the
        # handler it found; left at the default that kills this process on the spot, and
        # the cleanup below (worker, embedded stores, metrics directory) never ran
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            if n == 1:
                from app.main import create_app

                uvicorn.run(create_app(settings), **common)
            else:
                # each process builds its app from the environment set above (stores, key);
                # uvicorn's supervisor restarts a process that dies
                uvicorn.run("app.main:create_app", factory=True, workers=n, **common)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM, once uvicorn has stopped
            pass
    finally:
        # a second signal must not cut the cleanup short (a handler, not SIG_IGN, which
        # children started from here on would inherit)
        signal.signal(signal.SIGTERM, _ignore)
        signal.signal(signal.SIGINT, _ignore)
        if announcer is not None:
            announcer.stop()
        if worker is not None:
            worker.stop()
        stores.stop()
        prometheus_dir.remove()
        if lock is not None:
            lock.close()
        print("stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    settings = get_settings()
    logs.configure(settings.log_format, settings.log_level, settings.log_file)
    metrics_dir.export(settings.metrics_dir)  # for prometheus_client, not yet imported
    parser = argparse.ArgumentParser(
        prog="loom-memory",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="run the API and a background worker (its own PostgreSQL and Redis when "
        "DATABASE_URL / REDIS_URL are unset)",
        description="Run the API and a background worker (started again if it stops). With "
        "DATABASE_URL / REDIS_URL unset, start a PostgreSQL / Redis of its own in "
        "LOOM_DATA_DIR (default ./.loom); bring the database to the latest schema; print "
        "the address and the admin key once the API answers.",
    )
    serve.add_argument(
        "--host",
        metavar="HOST",
        help="interface to listen on (default LOOM_HOST, 127.0.0.1; 0.0.0.0 for all)",
    )
    serve.add_argument(
        "--port", type=int, metavar="PORT", help="port to listen on (default LOOM_PORT, 8420)"
    )
    serve.add_argument(
        "--no-worker",
        action="store_true",
        help="run no background worker (compression, facts, erasure jobs): run "
        "`loom-memory worker` separately",
    )
    serve.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="API processes (default LOOM_WEB_WORKERS; 0 = one per core)",
    )
    serve.set_defaults(fn=cmd_serve)
    sub.add_parser(
        "worker",
        help="run only a background worker (summaries, fact extraction, erasure), for "
        "deployments whose API runs with `serve --no-worker`",
    ).set_defaults(fn=cmd_worker)
    sub.add_parser(
        "migrate",
        help="bring the database to the latest schema (serve does it when it starts)",
    ).set_defaults(fn=cmd_migrate)
    oa = sub.add_parser("openapi", help="write the API's OpenAPI document (a JSON file)")
    oa.add_argument("--output", default="openapi/openapi.json")
    oa.set_defaults(fn=cmd_openapi)
    ck = sub.add_parser(
        "create-key",
        help="create an API key (admin, service or agent) in the database and print it once",
    )
    ck.add_argument("--role", choices=["admin", "service", "agent"], default="service")
    ck.add_argument("--tenant-id", type=uuid.UUID, help="an existing tenant")
    ck.add_argument(
        "--tenant-name",
        help="the tenant with this name, created if there is none (default: default)",
    )
    ck.add_argument("--agent-id")
    ck.set_defaults(fn=cmd_create_key)
    from app.eval.cli import add_parser as add_eval_parser

    add_eval_parser(sub)
    args = parser.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())

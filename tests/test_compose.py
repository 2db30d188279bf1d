"""The deployment files agree with the code: docker-compose.yml, deploy/nginx.conf and the
Dockerfile run CLI subcommands and flags that exist, set only settings the server reads,
give every long-running service a healthcheck (that works), run as non-root users, and
let the api scale (no fixed host port: the proxy publishes one and balances over it)."""

import asyncio
import json
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

from app.core.config import Settings
from app.launcher import cli
from tests.support.live import ROOT, free_port, live_api

COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
# built from the Dockerfile: the `loom-memory` image
OURS = {name: s for name, s in SERVICES.items() if "build" in s}
ONE_OFF = {"migrate"}
SETTINGS_ENV = {f.alias for f in Settings.model_fields.values() if f.alias}
ROOT_USERS = {"root", "0", "0:0", "root:root"}


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _healthcheck_code(test: list[str]) -> str:
    """The Python source of a `python -c` healthcheck (compose or Dockerfile exec form)."""
    assert test[0] == "CMD" and test[1:3] == ["python", "-c"], test
    return test[3]


@pytest.fixture
def parse_cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`parse_cli(argv)`: the subcommand app.launcher.cli's own parser picks for `loom-memory argv`,
    with every command function replaced so nothing runs; an unknown subcommand or flag
    fails the test."""

    def parse(argv: list[str]) -> str:
        ran: list[str] = []

        def record(args: Any) -> int:
            ran.append(args.command)
            return 0

        for name in dir(cli):
            if name.startswith("cmd_"):
                monkeypatch.setattr(cli, name, record)
        try:
            assert cli.main(argv) == 0
        except SystemExit as exc:
            pytest.fail(f"`loom-memory {' '.join(argv)}` is not a valid command ({exc.code})")
        return ran[0]

    return parse


def test_the_services():
    assert set(SERVICES) == {"postgres", "redis", "migrate", "api", "worker", "proxy"}
    assert set(OURS) == {"migrate", "api", "worker"}


def test_every_long_running_service_has_a_healthcheck():
    for name, service in SERVICES.items():
        if name in ONE_OFF:
            continue
        check = service.get("healthcheck") or {}
        assert check.get("test") and not check.get("disable"), name


def test_commands_are_cli_subcommands(parse_cli):
    roles = {"migrate": "migrate", "api": "serve", "worker": "worker"}
    for name, service in OURS.items():
        command = service["command"]
        assert command[0] == "loom-memory", name
        assert parse_cli(command[1:]) == roles[name]
    (cmd,) = [json.loads(args) for word, args in _dockerfile() if word == "CMD"]
    assert cmd[0] == "loom-memory" and parse_cli(cmd[1:]) == "serve"


def test_environment_holds_only_settings_the_server_reads():
    for name, service in OURS.items():
        env = service["environment"]
        assert set(env) <= SETTINGS_ENV, (name, set(env) - SETTINGS_ENV)
        assert env["DATABASE_URL"].startswith("postgresql://") and env["REDIS_URL"], name
        if name not in ONE_OFF:  # what its healthcheck reads is set
            code = _healthcheck_code(service["healthcheck"]["test"])
            for var in re.findall(r"os\.environ\['(\w+)'\]", code):
                assert var in env, (name, var)


def test_the_admin_key_is_required():
    for name in ("api", "worker"):
        key = SERVICES[name]["environment"]["LOOM_ADMIN_KEY"]
        assert re.fullmatch(r"\$\{LOOM_ADMIN_KEY:\?[^}]+\}", key), (name, key)


def test_the_api_scales_behind_the_proxy():
    api, proxy = SERVICES["api"], SERVICES["proxy"]
    assert "ports" not in api  # `--scale api=N` would clash on a fixed host port
    assert [name for name, s in SERVICES.items() if s.get("ports")] == ["proxy"]
    (published,) = proxy["ports"]
    host_port, container_port = published.split(":")
    assert host_port == "8420"
    assert proxy["depends_on"]["api"]["condition"] == "service_healthy"

    (mount,) = [v for v in proxy["volumes"] if v.endswith(":ro")]
    source, target, _ = mount.split(":")
    assert target.startswith("/etc/nginx/conf.d/")
    conf = (ROOT / source).read_text()
    api_port = api["environment"]["LOOM_PORT"]
    (upstream,) = re.findall(r"upstream\s+(\w+)\s*\{([^}]*)\}", conf)
    assert re.findall(r"^\s*server\s+(\S+)", upstream[1], re.M) == [f"api:{api_port}"]
    assert re.search(r"\bresolve;", upstream[1])  # replicas added later are found
    assert re.findall(r"proxy_pass\s+http://(\w+);", conf) == [upstream[0]]
    assert re.findall(r"^\s*listen\s+(\d+);", conf, re.M) == [container_port]
    assert "resolver 127.0.0.11" in conf  # Docker's DNS
    healthcheck = " ".join(proxy["healthcheck"]["test"])
    assert f":{container_port}/proxy-healthz" in healthcheck and "/proxy-healthz" in conf


def test_services_run_as_non_root():
    for name, service in SERVICES.items():
        if "build" in service:
            assert service.get("user", "10001") not in ROOT_USERS, name
        else:
            assert service.get("user") and service["user"] not in ROOT_USERS, name
    (user,) = [args for word, args in _dockerfile() if word == "USER"]
    assert user not in ROOT_USERS and not user.startswith("0:")


def test_the_image_installs_the_wheel_without_the_embedded_extra():
    instructions = _dockerfile()
    runs = " ".join(args for word, args in instructions if word == "RUN")
    assert "pip wheel" in runs and "pip install" in runs and "embedded" not in runs
    ignored = (ROOT / ".dockerignore").read_text().split()
    for word, args in instructions:
        if word == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert (ROOT / source).exists(), source  # e.g. no alembic.ini any more
                assert f"!{source}" in ignored or f"!{source}/" in ignored, source
    (check,) = [args for word, args in instructions if word == "HEALTHCHECK"]
    assert "CMD [" in check


@pytest.mark.slow
def test_the_api_healthchecks_work(settings):
    (check,) = [args for word, args in _dockerfile() if word == "HEALTHCHECK"]
    image_code = _healthcheck_code(["CMD", *json.loads(check.split("CMD", 1)[1])])
    compose_code = _healthcheck_code(SERVICES["api"]["healthcheck"]["test"])
    with live_api(settings) as base:
        port = base.rsplit(":", 1)[1]
        for code in (image_code, compose_code):
            subprocess.run(
                [sys.executable, "-c", code], env={"LOOM_PORT": port}, check=True, timeout=30
            )
    for code in (image_code, compose_code):  # and fail with the API gone
        assert (
            subprocess.run(
                [sys.executable, "-c", code],
                env={"LOOM_PORT": port},
                capture_output=True,
                timeout=30,
            ).returncode
            != 0
        )


@pytest.mark.slow
def test_the_worker_healthcheck_reads_its_metrics_port():
    from prometheus_client import start_http_server

    code = _healthcheck_code(SERVICES["worker"]["healthcheck"]["test"])
    port = str(free_port())
    env = {"LOOM_WORKER_METRICS_PORT": port}
    assert (
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, timeout=30
        ).returncode
        != 0
    )
    server, thread = start_http_server(int(port), addr="127.0.0.1")
    try:
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=30)
    finally:
        server.shutdown()
        thread.join(timeout=5)


def _compose_default(value: str) -> str:
    """`${NAME:-default}` -> default (compose's own substitution, for the numbers)."""
    m = re.fullmatch(r"\$\{\w+:-([^}]*)\}", value)
    return m.group(1) if m else value


def test_the_compose_connection_budget_fits_postgres_at_the_readme_scale() -> None:
    """api replicas x LOOM_DB_CONNECTIONS + workers x 12 + the reserve stays within the
    compose PostgreSQL's max_connections less its superuser slots, at the largest scale the
    README shows (issue 36: `--scale api=3` with 2 processes each needed 210 of 100)."""
    from app.launcher.budget import DEFAULT_RESERVE, WORKER_CONNECTIONS, per_process, plan

    command = " ".join(SERVICES["postgres"]["command"])
    max_connections = int(
        _compose_default(re.search(r"max_connections=(\S+)", command).group(1))  # type: ignore[union-attr]
    )
    env = SERVICES["api"]["environment"]
    per_replica = int(_compose_default(env["LOOM_DB_CONNECTIONS"]))
    processes = int(_compose_default(env["LOOM_WEB_WORKERS"]))
    readme = (ROOT / "README.md").read_text()
    scales = [int(n) for n in re.findall(r"--scale api=(\d+)", readme)]
    workers = max(int(n) for n in re.findall(r"--scale worker=(\d+)", readme))
    assert scales and max(scales) >= 3
    superuser_slots = 3  # PostgreSQL's default superuser_reserved_connections
    for replicas in scales:
        total = replicas * per_replica + workers * WORKER_CONNECTIONS + DEFAULT_RESERVE
        assert total <= max_connections - superuser_slots, (replicas, total, max_connections)
    # and each replica's plan fits its share
    p = plan(
        server=None,
        processes=processes,
        cpu_count=processes,
        pool_setting=Settings().db_pool_size,
        with_worker=False,
        connections=per_replica,
    )
    assert p.processes * per_process(p.pool) <= per_replica


def test_serve_says_its_plan_and_refuses_one_that_cannot_fit(settings: Any) -> None:
    """More API processes than the server has connections (each needs at least
    `MIN_POOL`'s share): refused before anything starts, whatever max_connections the
    test's server allows (asked here, as serve asks it)."""
    from app.launcher.budget import MIN_POOL, per_process

    server = asyncio.run(cli._server_limits(settings.database_url, 10))
    processes = server.max_connections  # each needs per_process(MIN_POOL) > 1 of them
    assert processes * per_process(MIN_POOL) > server.max_connections
    env = {
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "LOOM_MIGRATE_ON_START": "false",
        "LOOM_RUN_WORKER": "false",
        "PATH": "/usr/bin:/bin",
    }
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.launcher.cli",
            "serve",
            "--workers",
            str(processes),
            "--port",
            str(free_port()),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        f"{processes} API processes need at least {per_process(MIN_POOL)} database "
        "connections each" in run.stderr
    )
    assert f"max_connections {server.max_connections} - {server.reserved} reserved" in run.stderr
    assert "Traceback" not in run.stderr


def _seconds(duration: str) -> float:
    """A compose duration (`90s`, `2m`, `1m30s`, `500ms`) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def test_the_api_and_worker_restart_and_their_checks_fit_a_slow_cold_start():
    """A crashed api replica or worker comes back (compose's `restart:`), and a cold start
    on a loaded host (about 60 s was seen) is not declared unhealthy: the checks' grace
    period holds twice that, probing often meanwhile, so a replica joins the proxy as soon
    as it answers. The image's own HEALTHCHECK gives the same grace."""
    for name in ("api", "worker"):
        service = SERVICES[name]
        assert service.get("restart") in ("unless-stopped", "always", "on-failure"), name
        check = service["healthcheck"]
        assert _seconds(check["start_period"]) >= 120, name
        assert _seconds(check["start_interval"]) <= 2 < _seconds(check["interval"]), name
        # once started, a hung process is noticed within a minute
        assert _seconds(check["interval"]) * check["retries"] <= 60, name
    (check,) = [args for word, args in _dockerfile() if word == "HEALTHCHECK"]
    period = re.search(r"--start-period=(\S+)", check)
    assert period and _seconds(period.group(1)) >= 120

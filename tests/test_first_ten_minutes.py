"""What a newcomer meets first (issue 38): the command line's version and help, what
scripts/install-chromium (run by scripts/test) does on a machine without chromium, and
what `serve` logs where."""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.auth.keys import generate_key
from app.eval import cli as eval_cli
from app.eval.locomo_data import data_file, load_samples
from app.facts.startup import NO_LLM_LINE
from app.launcher import cli
from app.version import VERSION
from tests.support import databases
from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[1]
BASH = shutil.which("bash") or "/bin/bash"


def test_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"loom-memory {VERSION}\n"
    assert VERSION == "0.1.0"  # pyproject.toml's, read from the installed metadata


def test_serve_help_explains_every_option():
    out = subprocess.run(
        [sys.executable, "-m", "app.launcher.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    # argparse prints each option with its help text on the lines after it
    options = out[out.index("options:") :]
    for option, words in (
        ("--host HOST", "interface to listen on"),
        ("--port PORT", "port to listen on"),
        ("--no-worker", "run no background worker"),
        ("--workers N", "API processes"),
    ):
        assert option in options and words in options, options


def _fake_bin(tmp_path: Path, **tools: str) -> Path:
    """A PATH directory holding only these tools (bash scripts) and what the script
    itself runs (cat, sleep): no chromium on it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("cat", "sleep"):
        (bin_dir / name).symlink_to(shutil.which(name) or f"/bin/{name}")
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!{BASH}\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _install_chromium(bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, str(ROOT / "scripts" / "install-chromium")],
        env={"PATH": str(bin_dir), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_install_chromium_without_root_stops_saying_what_to_install(tmp_path):
    calls = tmp_path / "apt-calls"
    bin_dir = _fake_bin(tmp_path, id="echo 1000", **{"apt-get": f'echo "$*" >> {calls}'})
    r = _install_chromium(bin_dir)
    assert r.returncode == 1
    assert "need Debian's chromium, which is not installed" in r.stderr
    assert "sudo apt-get install chromium" in r.stderr and "LOOM_SKIP_BROWSER=1" in r.stderr
    assert not calls.exists()  # nothing was installed behind the user's back
    # skipping is explicit, and then nothing is checked or installed
    assert _install_chromium(bin_dir, LOOM_SKIP_BROWSER="1").returncode == 0


def test_install_chromium_as_root_says_what_it_installs_and_stops_when_apt_fails(tmp_path):
    calls = tmp_path / "apt-calls"
    bin_dir = _fake_bin(
        tmp_path,
        id="echo 0",
        **{"apt-get": f'echo "$*" >> {calls}; [ "$1" = update ] || exit 100'},
    )
    r = _install_chromium(bin_dir)
    assert r.returncode == 1
    said = r.stderr.splitlines()
    assert said[0].endswith(
        "installing the Debian package chromium system-wide (apt-get update; apt-get install "
        "chromium), or run with LOOM_SKIP_BROWSER=1 to skip those tests"
    )
    assert said[-1].startswith("apt-get install chromium failed: install it yourself")
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq chromium"]


def test_install_chromium_stops_at_once_on_ctrl_c(tmp_path):
    """Ctrl-C during `apt-get update` (which catches SIGINT and exits 1, as apt and pip do)
    ends the script with 130: it neither reports a failed install nor goes on."""
    started = tmp_path / "started"
    calls = tmp_path / "apt-calls"
    bin_dir = _fake_bin(
        tmp_path,
        id="echo 0",
        **{
            "apt-get": f"trap 'exit 1' INT; echo \"$*\" >> {calls}; : > {started}; "
            "for _ in $(seq 300); do sleep 0.1; done"
        },
    )
    (bin_dir / "seq").symlink_to(shutil.which("seq") or "/usr/bin/seq")
    proc = subprocess.Popen(
        [BASH, str(ROOT / "scripts" / "install-chromium")],
        env={"PATH": str(bin_dir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "interrupted"
    assert calls.read_text().splitlines() == ["update -qq"]


@pytest.mark.slow
def test_serve_log_gets_every_process_and_an_access_line_per_request(tmp_path):
    """`serve` with two API processes and its worker, text logs, LOOM_LOG_FILE set (as
    `serve` sets it to <data dir>/serve.log on the embedded stores): the file has the
    lines of the API processes (an access line per request) and of the worker; the
    terminal has no access lines, and "no LLM configured" once, not once per process."""
    log_file, out_path = tmp_path / "serve.log", tmp_path / "terminal.out"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    admin = generate_key()
    with databases.fresh_database("loom_logs") as name, out_path.open("w") as out:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "ANTHROPIC_"))}
        env.update(
            DATABASE_URL=databases.url_of(name),
            REDIS_URL=os.environ.get("LOOM_TEST_REDIS", "redis://127.0.0.1:6379/0"),
            LOOM_ADMIN_KEY=admin,
            LOOM_QUEUE_NAME=f"loom:logs:{uuid.uuid4().hex[:12]}",
            LOOM_LOG_FILE=str(log_file),
            LOOM_LLM_PROVIDER="none",
            LOOM_WORKER_METRICS_PORT=str(free_port()),
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.launcher.cli", "serve", "--workers", "2"]
            + ["--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                assert proc.poll() is None, out_path.read_text()
                try:
                    if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, out_path.read_text()
                time.sleep(0.2)
            made = httpx.post(
                f"{base}/v1/tenants",
                json={"name": "logs"},
                headers={"Authorization": f"Bearer {admin}"},
            )
            assert made.status_code == 201, made.text
            assert httpx.get(f"{base}/v1/nothing-here").status_code == 404
            # the worker says it started (arq) once it has connected
            while "arq.worker" not in log_file.read_text():
                assert time.monotonic() < deadline + 30, log_file.read_text()
                time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    terminal, logged = out_path.read_text(), log_file.read_text()
    assert terminal.count(NO_LLM_LINE) == 1, terminal
    assert "loom.access" not in terminal
    for line in ("GET /readyz 200", "POST /v1/tenants 201", "GET none 404"):
        assert f"INFO loom.access {line} " in logged, logged
    assert logged.count(NO_LLM_LINE) == 1


def test_console_screenshots_leave_the_committed_pngs_alone_unless_asked(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import console_screenshots as shots
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    default = shots.output_dir(shots.parse([]))
    assert default.is_dir() and not default.is_relative_to(ROOT)
    default.rmdir()
    assert shots.output_dir(shots.parse(["--out", str(tmp_path)])) == tmp_path
    docs = shots.output_dir(shots.parse(["--update-docs"]))
    assert docs == ROOT / "docs" / "console" and any(docs.glob("*.png"))
    with pytest.raises(SystemExit):  # one or the other
        shots.parse(["--update-docs", "--out", str(tmp_path)])


def test_the_readme_eval_command_works_from_a_clone(tmp_path):
    """The README's LoCoMo command as written: run from the clone through scripts/loom-memory
    (no `loom-memory` on PATH needed), on the file the README says to fetch; its samples
    are the development half; without the file it says where the data comes from."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Measuring the memory") :]
    block = re.search(r"^```bash\n(.*?)^```$", section, re.S | re.M)
    assert block is not None
    command = next(c for c in block[1].replace("\\\n", " ").splitlines() if "eval locomo" in c)
    argv = shlex.split(command)
    assert argv[:3] == ["./scripts/loom-memory", "eval", "locomo"]
    assert os.access(ROOT / argv[0], os.X_OK)
    args = eval_cli.parse(argv[3:])
    fetched = next(c for c in block[1].splitlines() if c.startswith("curl "))
    assert f"-o {args.data} " in fetched.replace("-sSfLo ", "-o ")
    shared = ROOT.parent / "shared" / "data" / "locomo-dev"
    if shared.is_dir():  # beside the clone here and in CI: its file is the same half
        samples = load_samples(data_file(shared), set(args.samples.split(",")))
        assert len(samples) == 5 and sum(len(s.questions) for s in samples) == 997
    missing = subprocess.run(
        [sys.executable, "-m", "app.launcher.cli", *argv[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"LoCoMo data not found: {args.data} (the file is ")
    assert "github.com/snap-research/LoCoMo" in missing.stderr


def test_the_readme_lists_every_mcp_tool():
    from app.mcp.server import TOOLS

    readme = (ROOT / "README.md").read_text()
    sentence = readme[readme.index("Its 14 tools:") : readme.index("Connect Claude Code")]
    listed: set[str] = set()
    for name in re.findall(r"`([a-z_|]+)`", sentence):
        first, *others = name.split("|")  # `shared_memory_get|put|list|delete`
        prefix = first.rsplit("_", 1)[0]
        listed |= {first, *(f"{prefix}_{other}" for other in others)}
    served = {spec.fn.__name__ for spec in TOOLS}
    assert listed == served and len(served) == 14


@pytest.mark.parametrize(
    ("variable", "service"),
    [("LOOM_TEST_PG", "PostgreSQL"), ("LOOM_TEST_REDIS", "Redis")],
)
def test_the_tests_stop_in_one_line_when_a_store_does_not_answer(variable, service):
    """Without the PostgreSQL or the Redis the tests use, pytest stops before any test
    with one line naming the service and the variable that points at another (not a
    traceback per test); the README says how to set both."""
    closed = free_port()
    url = {
        "LOOM_TEST_PG": f"postgresql://postgres:hush@127.0.0.1:{closed}/postgres",
        "LOOM_TEST_REDIS": f"redis://127.0.0.1:{closed}/0",
    }[variable]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2"]
        + ["tests/core/test_import_order.py"],
        env={**os.environ, variable: url},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 4, run.stdout + run.stderr
    (line,) = [x for x in run.stderr.splitlines() if x.strip()]
    assert line.startswith(f"ERROR: the tests need {service}, and "), line
    assert f"set {variable} to " in line and "hush" not in line  # no password shown
    assert "Traceback" not in run.stdout + run.stderr and "passed" not in run.stdout
    readme = (ROOT / "README.md").read_text()
    quick_start = readme[readme.index("## Quick start") : readme.index("## Tenants and keys")]
    assert variable in quick_start


def _fake_clone(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of scripts/test (with what it runs) beside two package definitions, whose
    .venv/bin/python only logs how it is called: (the clone, the log)."""
    clone, calls = tmp_path / "clone", tmp_path / "python-calls"
    for name in ("scripts/test", "scripts/lib/install-stamp.sh", "scripts/install-chromium"):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    for name in ("pyproject.toml", "clients/python/pyproject.toml"):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text("[project]\nname = 'x'\n")
    # the Citus pass (scripts/test-citus): logs its run; FAIL_PASS=citus makes it fail
    citus = clone / "scripts" / "test-citus"
    citus.write_text(
        f'#!{BASH}\necho "citus pass" >> {calls}\n[ "${{FAIL_PASS:-}}" != citus ] || exit 1\n'
    )
    citus.chmod(0o755)
    python = clone / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        f'#!{BASH}\necho "$*" >> {calls}\n[ "$1" != -VV ] || echo "Python 3.11.2"\n'
        '[ "$3" != install ] || [ -z "${FAIL_PIP:-}" ] || exit 1\n'
        # FAIL_PASS=0: the first pass fails, FAIL_PASS=8: the partitioned one
        '[ "$2" != pytest ] || [ "${FAIL_PASS:-}" != "${LOOM_PARTITIONS:-0}" ] || exit 1\n'
    )
    python.chmod(0o755)
    return clone, calls


def test_scripts_test_installs_only_when_the_package_definitions_changed(tmp_path):
    """`./scripts/test ARGS` installs on the first run (a fresh clone in CI gets
    everything), then goes straight to pytest until a pyproject.toml changes, the install
    fails (it is tried again) or LOOM_REINSTALL=1 asks for it."""
    clone, calls = _fake_clone(tmp_path)

    def run(**env: str) -> list[str]:
        calls.unlink(missing_ok=True)
        r = subprocess.run(
            [BASH, str(clone / "scripts" / "test"), "-q", "tests/x"],
            env={"PATH": os.environ["PATH"], "LOOM_SKIP_BROWSER": "1", **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        said = calls.read_text().splitlines() if calls.exists() else []
        assert r.returncode == (1 if env.get("FAIL_PIP") else 0), r.stderr
        return [c.split()[1] if c.startswith("-m ") else c for c in said]

    pytest_only = ["-VV", "pytest"]
    installs = ["-VV", "pip", "pip", "pytest"]
    assert run() == installs
    assert run() == pytest_only
    assert run() == pytest_only
    (clone / "clients/python/pyproject.toml").write_text("[project]\nname = 'y'\n")
    assert run() == installs
    assert run() == pytest_only
    assert run(LOOM_REINSTALL="1") == installs
    (clone / "pyproject.toml").write_text("[project]\nname = 'z'\n")
    assert run(FAIL_PIP="1") == ["-VV", "pip"]
    assert run() == installs  # a failed install is not recorded as done
    assert run() == pytest_only


@pytest.mark.parametrize("failing", ["", "0", "8", "citus"])
def test_scripts_test_runs_the_partitioned_pass_when_the_first_fails(tmp_path, failing):
    """`./scripts/test` runs the whole suite, the 8-partition pass and the Citus pass, each
    even when one before it failed (FAIL_PASS=0: the first fails; 8: the partitioned pass;
    citus: the Citus pass); it says which failed, and exits non-zero when one did."""
    clone, calls = _fake_clone(tmp_path)
    r = subprocess.run(
        [BASH, str(clone / "scripts" / "test")],
        env={"PATH": os.environ["PATH"], "LOOM_SKIP_BROWSER": "1", "FAIL_PASS": failing},
        capture_output=True,
        text=True,
        timeout=60,
    )
    passes = [
        c for c in calls.read_text().splitlines() if c.startswith(("-m pytest", "citus pass"))
    ]
    assert len(passes) == 3 and "--db-tests-only" in passes[1], (passes, r.stderr)
    assert passes[2] == "citus pass", passes
    assert "8 hash partitions" in r.stdout
    if failing:
        which = {"0": "the suite", "8": "the 8-partition pass", "citus": "the Citus pass"}[failing]
        assert r.returncode == 1 and f"--- failed: {which}" in r.stderr, r.stderr
    else:
        assert r.returncode == 0 and "failed" not in r.stderr, r.stderr


def test_migrate_says_what_it_did_in_one_line(tmp_path):
    """`loom-memory migrate` on an empty database, on one a few revisions behind, and on
    one at the latest schema: one line each saying what it did, without Alembic's lines
    (about 30 at INFO, plugins and steps); LOOM_LOG_LEVEL=debug shows them."""
    from alembic import command

    from app.launcher.migrate import alembic_config, heads, steps_between

    (head,) = heads()
    with databases.fresh_database("loom_migrate") as name:
        url = databases.url_of(name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
        env["DATABASE_URL"] = url

        def migrate(**extra: str) -> subprocess.CompletedProcess[str]:
            r = subprocess.run(
                [sys.executable, "-m", "app.launcher.cli", "migrate"],
                env={**env, **extra},
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert r.returncode == 0, r.stderr
            return r

        everything = steps_between((), (head,))
        assert everything >= 18  # 0001 .. 0019, two merged branches
        first = migrate()
        assert first.stdout == (
            f"database migrated from an empty database to {head}, the latest schema "
            f"({everything} migrations)\n"
        )
        assert first.stderr == ""
        again = migrate()
        assert again.stdout == f"database already at {head}, the latest schema\n"
        assert again.stderr == ""
        assert "alembic" in migrate(LOOM_LOG_LEVEL="debug").stderr
    with databases.fresh_database("loom_migrate") as name:
        url = databases.url_of(name)
        env["DATABASE_URL"] = url
        command.upgrade(alembic_config(url), "0017_context_manifests")
        behind = migrate()
        assert behind.stdout == (
            f"database migrated from 0017_context_manifests to {head}, the latest schema "
            f"({steps_between(('0017_context_manifests',), (head,))} migrations)\n"
        )
        assert behind.stderr == ""


def test_the_help_speaks_to_a_user(monkeypatch):
    """`loom-memory --help` says what the server is, how to start it and where to look,
    with examples that are valid commands; no names of the code's internals."""
    out = subprocess.run(
        [sys.executable, "-m", "app.launcher.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.index("memory server for LLM agents") < out.index("positional arguments")
    for said in ("loom-memory serve", "http://127.0.0.1:8420", "/docs", "/console", "examples:"):
        assert said in out, said
    for internal in ("Supervised", "run_forever", "workers.settings", "arq", "`Supervised`"):
        assert internal not in out, internal
    # every example is a command the parser takes (nothing runs: the commands are replaced)
    examples = out[out.index("examples:") :].split("\n\n")[0].splitlines()[1:]
    assert len(examples) >= 3
    ran: list[str] = []

    def record(args: Any) -> int:
        ran.append(args.command)
        return 0

    for name in dir(cli):
        if name.startswith("cmd_"):
            monkeypatch.setattr(cli, name, record)
    for line in examples:
        argv = shlex.split(line.split("  ")[1] if line.startswith("  ") else line)
        argv = [a for a in argv if "=" not in a or a.startswith("-")]  # VAR=value prefixes
        assert argv[0] == "loom-memory", line
        assert cli.main(argv[1:]) == 0, line
    assert len(ran) == len(examples)
    # and each command's one-line help is there
    for command in ("serve", "worker", "migrate", "openapi", "create-key", "eval"):
        assert re.search(rf"^    {command}\s+\S", out, re.M), command


def test_every_console_screenshot_is_made_by_the_script_and_linked():
    """docs/console/ holds exactly the screenshots scripts/console_screenshots.py makes
    (so `--update-docs` retakes them all, the Users tab included), and the README links
    each."""
    script = (ROOT / "scripts" / "console_screenshots.py").read_text()
    made = set(re.findall(r'^\s+\("([a-z-]+)", (?:f?")#/', script, re.M))
    assert {"users", "user"} <= made
    committed = {p.stem for p in (ROOT / "docs" / "console").glob("*.png")}
    assert committed == made
    readme = (ROOT / "README.md").read_text()
    for name in made:
        assert f"(docs/console/{name}.png)" in readme, name

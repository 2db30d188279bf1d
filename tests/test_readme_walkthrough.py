"""The README's curl walkthrough, run as written: its ```bash blocks between
`<!-- walkthrough:start -->` and `<!-- walkthrough:end -->`, in one `bash -euo pipefail`,
against `loom-memory serve` on a fresh database. The blocks read `LOOM` and `ADMIN` from
the environment when set, so only those two differ from a reader's run."""

import asyncio
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.auth.keys import generate_key
from tests.support import databases
from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[1]
REDIS_TEST_URL = os.environ.get("LOOM_TEST_REDIS", "redis://127.0.0.1:6379/0")
START, END = "<!-- walkthrough:start -->", "<!-- walkthrough:end -->"


def walkthrough_blocks(readme: str) -> list[str]:
    """The ```bash blocks between the walkthrough markers, in order."""
    section = readme[readme.index(START) + len(START) : readme.index(END)]
    return re.findall(r"^```bash\n(.*?)^```$", section, re.S | re.M)


def later_blocks(readme: str) -> list[str]:
    """The ```bash blocks after the walkthrough that call the server (`$LOOM`)."""
    rest = readme[readme.index(END) :]
    return [b for b in re.findall(r"^```bash\n(.*?)^```$", rest, re.S | re.M) if "$LOOM" in b]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`loom-memory serve --no-worker` (two API processes, as on a two-core machine) on a
    free port and a fresh database it migrates itself; yields (base URL, admin key)."""
    name = f"loom_readme_{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(databases.admin(f'CREATE DATABASE "{name}"'))
    admin = generate_key()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "ANTHROPIC_"))}
    env.update(
        {
            "DATABASE_URL": databases.url_of(name),
            "REDIS_URL": REDIS_TEST_URL,
            "LOOM_ADMIN_KEY": admin,
            "LOOM_QUEUE_NAME": f"loom:readme:{uuid.uuid4().hex[:12]}",
            "LOOM_DATA_DIR": str(tmp_path / "data"),
            "LOOM_LLM_PROVIDER": "none",  # BM25 order and heuristic summaries: stable output
        }
    )
    exe = Path(sys.executable).with_name("loom-memory")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "app.launcher.cli"]
    proc = subprocess.Popen(
        [*argv, "serve", "--no-worker", "--port", str(port), "--workers", "2"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise AssertionError(
                    f"serve exited with {proc.returncode}:\n"
                    f"{proc.stdout.read() if proc.stdout else ''}"
                )
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not become ready"
            time.sleep(0.3)
        yield base, admin
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        asyncio.run(databases.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_walkthrough_blocks_fail_on_errors() -> None:
    """Every request either fails the run on an error status, prints the status it shows
    on purpose, or reads the error it expects (the background SSE watch ends by its
    --max-time)."""
    blocks = walkthrough_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 10
    script = "\n".join(blocks)
    assert script.startswith("LOOM=${LOOM:-") and "ADMIN=${ADMIN:-" in script
    for command in re.split(r"\$\(|\n(?!\s)", script):
        if command.lstrip().startswith("curl "):
            assert (
                "--fail-with-body" in command
                or "%{http_code}" in command
                or "--max-time" in command
                or 'd["error"]' in command
            ), command


@pytest.mark.slow
def test_readme_walkthrough_runs(server: tuple[str, str], tmp_path: Path) -> None:
    base, admin = server
    script = "\n".join(walkthrough_blocks((ROOT / "README.md").read_text()))
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LOOM": base, "ADMIN": admin},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = run.stdout
    assert run.returncode == 0, f"exit {run.returncode}\n{out}\n{run.stderr}"
    lines = out.splitlines()
    # sessions and messages
    assert '"replayed":false' in out and '"next_cursor":null' in out
    # both context formats; the first two turns are summarised out of L1
    assert '"format":"anthropic"' in out and "covers msg:1-2" in out
    assert "{'role': 'system', 'content': '## Earlier conversation" in out
    # conversation ranking finds the answer (seq 4) with no query word; plain BM25 doesn't
    # (the answer itself ranks first since turns answering a question weigh more:
    # docs/search-prior.md)
    conversation = next(ln for ln in lines if ln.startswith("[(") and "(2, " in ln)
    assert "(4, 'Sunday 02:00 UTC, when traffic is lowest.')" in conversation
    bm25 = lines.index("[2, 3]")
    # promoted (of the two best matches, those not in L1), counted in the context's
    # tokens, cleared
    promoted = next(
        i for i, ln in enumerate(lines) if i > bm25 and re.fullmatch(r"\[\d+(, \d+)?\]", ln)
    )
    count = len(json.loads(lines[promoted]))
    assert int(lines[promoted + 1]) > 0 and lines[promoted + 2] == f'{{"cleared":{count}}}'
    # recall puts the old turns back beside L1, and is off for one request
    recalled = next(i for i, ln in enumerate(lines) if ln.startswith("[1, 2, 3, 4] ["))
    assert lines[recalled + 1] == "None"
    # shared memory: scoped PUT/GET, CAS conflict, private agent namespace, SSE event
    assert "{'step': 'snapshot', 'night': 'Sunday'}" in out
    assert any('"code":"version_conflict"' in ln and ln.endswith(" 409") for ln in lines)
    assert "ask ops about the replica" in lines
    assert any('"code":"entry_not_found"' in ln and ln.endswith(" 404") for ln in lines)
    assert '"scope_id":"critic","items":[]' in out
    event = lines.index("event: put")
    assert lines[event + 1].startswith("data: ") and '"value":"window booked"' in lines[event + 1]
    # A reader who runs it twice (the tenant exists by then) gets through it again.
    again = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LOOM": base, "ADMIN": admin},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, f"exit {again.returncode}\n{again.stdout}\n{again.stderr}"
    # The blocks further down that call the server ($LOOM: users, export and import, the
    # audit trail) continue the walkthrough's shell: each runs as written, sets what it
    # uses, ends its output with a newline, and leaves no file where it runs.
    later = later_blocks((ROOT / "README.md").read_text())
    assert len(later) >= 3 and any("$OTHER" in b for b in later)
    here = tmp_path / "reader"
    here.mkdir()
    more = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join([script, *later])],
        cwd=here,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LOOM": base, "ADMIN": admin},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert more.returncode == 0, f"exit {more.returncode}\n{more.stdout}\n{more.stderr}"
    assert more.stderr == ""
    tail = more.stdout[-4000:]
    for glued in ("}{", "}[", "]{", "}curl", "}ok"):
        assert glued not in more.stdout, tail
    assert more.stdout.endswith("\n")
    assert '"user_id":"cust-4711"' in more.stdout and '"erasure_id"' in more.stdout
    assert '"changed"' in more.stdout  # the diff of the two recorded builds
    assert list(here.iterdir()) == []

"""What a newcomer meets first (issue 38): the command line's version and help, and what
scripts/install-chromium (run by scripts/test) does on a machine without chromium."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.launcher import cli
from app.version import VERSION

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

"""The examples tell a newcomer what to set, instead of ending in a traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.live import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("LOOM_KEY", "LOOM_ADMIN_KEY", "LOOM_URL")}
    return subprocess.run([sys.executable, f"examples/{script}"], env={**base, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("script", "variable"), [("agent_loop.py", "LOOM_KEY"),
                                                  ("dnd_party.py", "LOOM_ADMIN_KEY")])
def test_without_a_key_the_example_says_what_to_set(script, variable):
    out = _run(script)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert out.stderr.startswith(f"Set {variable} to")


@pytest.mark.parametrize(("script", "variable"), [("agent_loop.py", "LOOM_KEY"),
                                                  ("dnd_party.py", "LOOM_ADMIN_KEY")])
def test_without_a_server_the_example_says_so(script, variable):
    url = f"http://127.0.0.1:{free_port()}"
    out = _run(script, **{variable: "lm_x", "LOOM_URL": url})
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith(f"Cannot reach Loom Memory at {url}")

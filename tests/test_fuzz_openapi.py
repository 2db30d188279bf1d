"""The server does what its OpenAPI document says: schemathesis with every check and phase.

Configuration: schemathesis.toml (all checks; examples, coverage, fuzzing and stateful phases;
the few justified exceptions are commented there) and tests/fuzz/hooks.py. Zero failures is
the bar. A longer run of the same configuration: LOOM_FUZZ_MAX_EXAMPLES=200 (README,
"Fuzzing the API").
"""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.live import ROOT, live_api

pytestmark = pytest.mark.slow


def test_schemathesis_all_checks_all_phases(settings):
    with live_api(settings) as base:
        admin = {"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"}
        tenant = httpx.post(
            f"{base}/v1/tenants", json={"name": f"fuzz-{uuid.uuid4().hex[:8]}"}, headers=admin
        ).json()
        key = httpx.post(
            f"{base}/v1/api-keys",
            json={"tenant_id": tenant["id"], "role": "service"},
            headers=admin,
        ).json()
        extra = []
        if os.environ.get("LOOM_FUZZ_MAX_EXAMPLES"):
            extra = ["--max-examples", os.environ["LOOM_FUZZ_MAX_EXAMPLES"]]
        proc = subprocess.run(
            [
                str(Path(sys.executable).parent / "st"),
                "--config-file",
                str(ROOT / "schemathesis.toml"),
                "run",
                f"{base}/openapi.json",
                "--no-color",
                *extra,
            ],
            env={**os.environ, "LOOM_FUZZ_KEY": key["secret"]},
            capture_output=True,
            text=True,
            timeout=1800,
            cwd=ROOT,
        )
        out = proc.stdout
        assert proc.returncode == 0, out[out.find("FAILURES") :][-12000:] + proc.stderr[-2000:]
        assert "Traceback" not in out
        # every phase ran (none was skipped for want of operations or links)
        for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
            assert f"✅ {phase}" in out, out[-4000:]

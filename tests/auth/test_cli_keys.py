"""`loom-memory create-key` writes a working key straight into the database."""

import json
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from app.auth.keys import hash_key
from tests.support.api import make_client
from tests.support.live import settings_env

ROOT = Path(__file__).resolve().parents[2]


async def test_create_key_cli(app, settings, db):
    out = subprocess.run(  # noqa: ASYNC221
        [
            sys.executable,
            "-m",
            "app.launcher.cli",
            "create-key",
            "--role",
            "service",
            "--tenant-name",
            "cli-tenant",
        ],
        env=settings_env(settings),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout[out.stdout.index("{") :])
    assert made["secret"].startswith("lm_") and made["role"] == "service"
    assert made["secret"] not in out.stderr
    stored = (
        await db.execute(
            sa.text("select key_hash from api_keys where tenant_id = :t"), {"t": made["tenant_id"]}
        )
    ).scalar_one()
    assert stored == hash_key(made["secret"])
    async with make_client(app, made["secret"], {"X-Agent-Id": "cli"}) as c:
        r = await c.post("/v1/sessions", json={})
        assert r.status_code == 201

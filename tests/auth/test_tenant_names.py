"""Tenant names are unique per deployment: over HTTP (409 `tenant_exists`) and for
`loom-memory create-key --tenant-name` (the existing tenant gets the key)."""

import json
import subprocess
import sys
import uuid
from pathlib import Path

from tests.support.api import make_client
from tests.support.live import settings_env

ROOT = Path(__file__).resolve().parents[2]


async def test_second_tenant_with_a_name_is_409_naming_the_first(admin_client):
    name = f"acme-{uuid.uuid4().hex[:8]}"
    first = await admin_client.post("/v1/tenants", json={"name": name})
    assert first.status_code == 201, first.text
    again = await admin_client.post(
        "/v1/tenants", json={"name": name, "text_search_config": "simple"}
    )
    assert again.status_code == 409, again.text
    error = again.json()["error"]
    assert error["code"] == "tenant_exists"
    assert error["details"] == {"tenant_id": first.json()["id"]}
    # names compare exactly: another spelling is another tenant
    other = await admin_client.post("/v1/tenants", json={"name": name.upper()})
    assert other.status_code == 201


def _create_key(settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.launcher.cli", "create-key", *args],
        env=settings_env(settings),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_create_key_with_a_tenant_name_reuses_that_tenant(app, admin_client, settings):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    tenant = (await admin_client.post("/v1/tenants", json={"name": name})).json()
    out = _create_key(settings, "--role", "service", "--tenant-name", name)
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    assert made["tenant_id"] == tenant["id"] and made["tenant_name"] == name
    assert "existing tenant" in out.stderr
    async with make_client(app, made["secret"], {"X-Agent-Id": "cli"}) as c:
        assert (await c.post("/v1/sessions", json={})).status_code == 201

    # a new name creates the tenant once; the next key joins it
    fresh = f"cli-new-{uuid.uuid4().hex[:8]}"
    one = _create_key(settings, "--tenant-name", fresh)
    two = _create_key(settings, "--tenant-name", fresh)
    assert "created tenant" in one.stderr and "existing tenant" in two.stderr
    assert json.loads(one.stdout)["tenant_id"] == json.loads(two.stdout)["tenant_id"]


def test_create_key_refuses_an_unknown_tenant_id_in_one_line(settings):
    out = _create_key(settings, "--tenant-id", str(uuid.uuid4()))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines()[-1].startswith("No tenant has the id")
    assert "Traceback" not in out.stderr

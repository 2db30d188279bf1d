import os, subprocess, sys, uuid
from pathlib import Path
import httpx
from tests.support.live import ROOT, live_api

def test_fuzz_some(settings):
    with live_api(settings) as base:
        admin = {"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"}
        tenant = httpx.post(f"{base}/v1/tenants", json={"name": f"fuzz-{uuid.uuid4().hex[:8]}"}, headers=admin).json()
        key = httpx.post(f"{base}/v1/api-keys", json={"tenant_id": tenant["id"], "role": "service"}, headers=admin).json()
        proc = subprocess.run([str(Path(sys.executable).parent / "st"), "--config-file", str(ROOT / "schemathesis.toml"), "run", f"{base}/openapi.json", "--no-color",
             "--include-path-regex", "memory-items|context-packages|memory/extract|/context$"],
            env={**os.environ, "LOOM_FUZZ_KEY": key["secret"]}, capture_output=True, text=True, timeout=1200, cwd=ROOT)
        out = proc.stdout
        print(out[-3000:])
        assert proc.returncode == 0, out[out.find("FAILURES"):][-12000:] + proc.stderr[-2000:]

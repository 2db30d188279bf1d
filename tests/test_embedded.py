"""The README's serve command on the embedded default: a real subprocess on a free port."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.live import free_port

pytestmark = pytest.mark.slow


def _wait_ready(base: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited early with {proc.returncode}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("serve did not become ready")


def _serve(data_dir: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "LOOM_ADMIN_KEY")}
    env["LOOM_DATA_DIR"] = str(data_dir)
    return subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=Path(__file__).resolve().parents[1])


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError("serve did not stop on SIGINT:\n" + out) from None
    return out


def test_embedded_default_serves_and_stops(tmp_path):
    data_dir = tmp_path / "loom"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _serve(data_dir, port)
    try:
        _wait_ready(base, proc)
        key_file = data_dir / "admin_key"
        assert key_file.exists() and (key_file.stat().st_mode & 0o777) == 0o600
        admin = {"Authorization": f"Bearer {key_file.read_text().strip()}"}
        tenant = httpx.post(f"{base}/v1/tenants", json={"name": "e2e"}, headers=admin).json()
        key = httpx.post(f"{base}/v1/api-keys", json={"tenant_id": tenant["id"],
                                                      "role": "service"}, headers=admin).json()
        h = {"Authorization": f"Bearer {key['secret']}", "X-Agent-Id": "bot"}
        sid = httpx.post(f"{base}/v1/sessions", json={}, headers=h).json()["id"]
        r = httpx.post(f"{base}/v1/sessions/{sid}/messages", headers=h, json={"messages": [
            {"role": "user", "content": "hello embedded"},
            {"role": "assistant", "content": "hi"}]})
        assert r.status_code == 201, r.text
        got = httpx.get(f"{base}/v1/sessions/{sid}/messages", headers=h).json()
        assert [m["content"] for m in got["items"]] == ["hello embedded", "hi"]
        assert httpx.get(f"{base}/docs").status_code == 200
    finally:
        out = _stop(proc)
    assert proc.returncode == 0, out
    assert "Swagger UI" in out and "/docs" in out
    assert "admin key (shown once" in out
    secret = (data_dir / "admin_key").read_text().strip()
    assert out.count(secret) == 1

    # A second start keeps the data and does not print the key again.
    proc = _serve(data_dir, port)
    try:
        _wait_ready(base, proc)
        h2 = {"Authorization": f"Bearer {key['secret']}", "X-Agent-Id": "bot"}
        got = httpx.get(f"{base}/v1/sessions/{sid}/messages", headers=h2)
        assert got.status_code == 200 and len(got.json()["items"]) == 2
    finally:
        out = _stop(proc)
    assert secret not in out

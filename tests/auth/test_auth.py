"""Identity on every route: walks the served OpenAPI document, so new routes are covered."""

import re
import uuid

import sqlalchemy as sa

from app.auth.keys import hash_key
from tests.support.api import make_client, new_session

PUBLIC = {
    "/healthz",
    "/readyz",
    "/metrics",
    "/docs",
    "/openapi.json",
    "/redoc",
    "/docs/oauth2-redirect",
}


def _operations(app):
    doc = app.openapi()
    for path, item in doc["paths"].items():
        if path in PUBLIC:
            continue
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                yield method.upper(), path


def _fill(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), str(uuid.uuid4())), path)


async def _snapshot(db, tenant_id: str):
    """Every row of one tenant, in every table (all tables carry tenant_id)."""
    tables = (
        (
            await db.execute(
                sa.text(
                    "select tablename from pg_tables where schemaname = 'public' "
                    "and tablename <> 'alembic_version' order by 1"
                )
            )
        )
        .scalars()
        .all()
    )
    rows = {}
    for t in tables:
        rows[t] = (
            await db.execute(
                sa.text(
                    f"select md5(string_agg(x::text, ',' order by x::text)) from \"{t}\" x "
                    "where tenant_id = :t"
                ),
                {"t": tenant_id},
            )
        ).scalar()
    return rows


# Path parameters that name objects; the others (agent_id, task_id, namespace, key) are
# names a caller chooses, so in B's tenant they simply address B's own (empty) data.
OBJECT_PARAMS = {"session_id", "key_id", "item_id", "ref_id", "id"}


async def test_every_operation_requires_a_valid_key(app, tenant):
    anon = make_client(app, "")
    anon.headers.pop("Authorization")
    bogus = make_client(app, "lm_not_a_real_key")
    revoked = await tenant.create_key("service")
    r = await tenant.admin.delete(f"/v1/api-keys/{revoked['id']}", params={"tenant_id": tenant.id})
    assert r.status_code == 204
    revoked_client = make_client(app, revoked["secret"], {"X-Agent-Id": "agent-1"})
    ops = list(_operations(app))
    assert len(ops) >= 9
    for method, path in ops:
        url = _fill(path, {})
        for c in (anon, bogus, revoked_client):
            r = await c.request(method, url, json={})
            assert r.status_code == 401, (method, path, r.status_code, r.text)
            assert r.json()["error"]["code"] == "unauthorized"
            assert "lm_" not in r.text
    for c in (anon, bogus, revoked_client):
        await c.aclose()


async def test_other_tenants_key_changes_nothing(app, tenant, admin_client, db):
    """Create real objects in tenant A; tenant B's service key gets 404/403 on each."""
    a = tenant.client_for(tenant.service_key, {"X-Agent-Id": "agent-1"})
    sid = await new_session(a)
    await a.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "secret of tenant A"}]},
    )
    key_a = await tenant.create_key("agent", "agent-1")
    ids = {"session_id": sid, "key_id": key_a["id"], "agent_id": "agent-1"}

    tb = (
        await admin_client.post("/v1/tenants", json={"name": f"b-{uuid.uuid4().hex[:8]}"})
    ).json()["id"]
    kb = (await admin_client.post("/v1/api-keys", json={"tenant_id": tb, "role": "service"})).json()
    b = tenant.client_for(kb["secret"], {"X-Agent-Id": "agent-1"})
    before = await _snapshot(db, tenant.id)
    for method, path in _operations(app):
        params = set(re.findall(r"\{(\w+)\}", path))
        r = await b.request(method, _fill(path, ids), json={})
        if params & OBJECT_PARAMS:
            assert r.status_code in (403, 404, 422), (method, path, r.status_code, r.text)
        else:
            assert r.status_code < 500, (method, path, r.status_code, r.text)
        assert "secret of tenant A" not in r.text
    await db.rollback()
    assert await _snapshot(db, tenant.id) == before
    still = await a.get(f"/v1/sessions/{sid}/messages")
    assert still.status_code == 200 and len(still.json()["items"]) == 1


async def test_agent_key_with_foreign_agent_header_is_403(app, tenant):
    agent = await tenant.new_client(role="agent", agent_id="alice")
    sid = await new_session(agent)
    ids = {"session_id": sid, "agent_id": "alice"}
    foreign = tenant.client_for(
        agent.headers["Authorization"].split()[1], {"X-Agent-Id": "mallory"}
    )
    for method, path in _operations(app):
        if path.startswith(("/v1/tenants", "/v1/api-keys")):
            continue  # not agent-scoped: agent keys get 403 there anyway
        r = await foreign.request(method, _fill(path, ids), json={})
        assert r.status_code == 403, (method, path, r.status_code, r.text)


async def test_key_secret_shown_once_and_only_hash_stored(tenant, db):
    created = await tenant.create_key("service")
    secret = created["secret"]
    assert secret.startswith("lm_") and len(secret) >= 3 + 43
    row = (
        await db.execute(
            sa.text("select key_hash, prefix from api_keys where id = :i"), {"i": created["id"]}
        )
    ).one()
    assert row.key_hash == hash_key(secret) and secret not in row.key_hash
    listed = await tenant.admin.get("/v1/api-keys", params={"tenant_id": tenant.id})
    assert listed.status_code == 200
    assert secret not in listed.text
    assert created["id"] in [k["id"] for k in listed.json()["items"]]
    dump = (await db.execute(sa.text("select row_to_json(k)::text from api_keys k"))).scalars()
    assert all(secret not in d for d in dump)


async def test_revocation_takes_effect_on_next_request(app, tenant):
    created = await tenant.create_key("service")
    c = tenant.client_for(created["secret"], {"X-Agent-Id": "a"})
    assert (await c.get("/v1/sessions")).status_code == 200
    assert (
        await tenant.admin.delete(f"/v1/api-keys/{created['id']}", params={"tenant_id": tenant.id})
    ).status_code == 204
    assert (await c.get("/v1/sessions")).status_code == 401


async def test_roles(app, tenant, admin_client):
    svc = tenant.client_for(tenant.service_key)
    assert (await svc.post("/v1/tenants", json={"name": "x"})).status_code == 403
    # service keys mint agent keys for their own tenant only
    r = await svc.post("/v1/api-keys", json={"role": "agent", "agent_id": "p1"})
    assert r.status_code == 201 and r.json()["tenant_id"] == tenant.id
    assert (await svc.post("/v1/api-keys", json={"role": "service"})).status_code == 403
    agent = tenant.client_for(r.json()["secret"])
    assert (await agent.get("/v1/api-keys")).status_code == 403
    assert (await svc.post("/v1/api-keys", json={"role": "agent"})).status_code == 422
    # admin acts inside a tenant with X-Tenant-Id
    r = await admin_client.get("/v1/sessions", headers={"X-Tenant-Id": tenant.id})
    assert r.status_code == 200
    assert (await admin_client.get("/v1/sessions")).status_code == 400
    assert (
        await admin_client.get("/v1/sessions", headers={"X-Tenant-Id": str(uuid.uuid4())})
    ).status_code == 404
    assert (
        await admin_client.get("/v1/sessions", headers={"X-Tenant-Id": "nope"})
    ).status_code == 400


async def test_rate_limit_429_with_retry_after(settings, tenant):
    from app.main import create_app

    limited = create_app(
        settings.model_copy(update={"rate_limit_per_second": 1.0, "rate_limit_burst": 3})
    )
    async with limited.router.lifespan_context(limited):
        c = make_client(limited, tenant.service_key, {"X-Agent-Id": "a"})
        codes = [(await c.get("/v1/sessions")).status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200]
        assert 429 in codes[3:]
        r = await c.get("/v1/sessions")
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["code"] == "rate_limited"
        await c.aclose()


async def test_keys_never_logged(app, tenant, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    c = tenant.client_for(tenant.service_key, {"X-Agent-Id": "a"})
    await c.get("/v1/sessions")
    await c.get("/v1/sessions/not-a-uuid")
    created = await tenant.create_key("agent", "z")
    assert tenant.service_key not in caplog.text
    assert created["secret"] not in caplog.text

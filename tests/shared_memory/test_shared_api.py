"""Shared memory over HTTP: scoping, CAS, compression, integrity, TTL, stats, listing."""

import asyncio
import json
import uuid

import sqlalchemy as sa

from app.shared_memory.metrics import INTEGRITY_ERRORS
from app.shared_memory.runtime import SharedMemoryRuntime
from app.shared_memory.tasks import cleanup_expired_shared_memory
from app.state import app_state
from tests.support.api import make_client, new_session
from tests.support.worker import worker_ctx

SM = "/v1/shared-memory"


async def test_put_get_json_and_raw(client):
    r = await client.put(
        f"{SM}/global/config", json={"value": {"a": [1, 2]}, "metadata": {"by": "test"}}
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["created"] is True and body["version"] > 0
    assert r.headers["etag"] == f'"{body["version"]}"'
    assert r.headers["x-loom-checksum"] == f"sha256={body['checksum']}"
    got = await client.get(f"{SM}/global/config")
    assert got.status_code == 200
    assert got.json()["value"] == {"a": [1, 2]} and got.json()["metadata"] == {"by": "test"}
    assert got.headers["x-loom-storage-location"] in ("memory", "postgres")

    raw = bytes(range(256)) * 10
    r = await client.put(
        f"{SM}/global/blob",
        content=raw,
        headers={"Content-Type": "application/x-thing", "X-Loom-Metadata": '{"k": 1}'},
    )
    assert r.status_code == 201, r.text
    got = await client.get(f"{SM}/global/blob")
    assert got.content == raw and got.headers["content-type"] == "application/x-thing"
    again = await client.put(
        f"{SM}/global/blob", content=b"x", headers={"Content-Type": "text/plain"}
    )
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["ref_id"] == r.json()["ref_id"]  # a replace keeps the reference id
    assert (
        await client.get(f"{SM}/global/blob", headers={"If-None-Match": again.headers["etag"]})
    ).status_code == 304


async def test_same_key_is_separate_per_namespace_and_scope(client, tenant):
    sid = await new_session(client)
    targets = [
        ("global", None),
        ("workflow", "w1"),
        ("workflow", "w2"),
        ("swarm", "w1"),
        ("debate", "w1"),
        ("session", sid),
        ("agent", None),
    ]
    for i, (ns, scope) in enumerate(targets):
        params = {"scope_id": scope} if scope else {}
        r = await client.put(f"{SM}/{ns}/shared", params=params, json={"value": i})
        assert r.status_code == 201, (ns, r.text)
    other_agent = tenant.client_for(tenant.service_key, {"X-Agent-Id": "agent-2"})
    assert (await other_agent.get(f"{SM}/agent/shared")).status_code == 404
    for i, (ns, scope) in enumerate(targets):
        params = {"scope_id": scope} if scope else {}
        assert (await client.get(f"{SM}/{ns}/shared", params=params)).json()["value"] == i


async def test_scope_rules(client):
    assert (await client.put(f"{SM}/workflow/k", json={"value": 1})).json()["error"][
        "code"
    ] == "invalid_scope"
    assert (
        await client.put(f"{SM}/global/k", params={"scope_id": "x"}, json={"value": 1})
    ).status_code == 400
    assert (
        await client.put(f"{SM}/agent/k", params={"scope_id": "agent-2"}, json={"value": 1})
    ).status_code == 400
    r = await client.put(f"{SM}/session/k", params={"scope_id": "not-a-uuid"}, json={"value": 1})
    assert r.status_code == 400
    r = await client.put(
        f"{SM}/session/k",
        params={"scope_id": "00000000-0000-0000-0000-000000000000"},
        json={"value": 1},
    )
    assert r.status_code == 404
    assert (await client.put(f"{SM}/nope/k", json={"value": 1})).status_code == 422


async def test_agent_namespace_needs_an_agent(tenant):
    service = tenant.client_for(tenant.service_key)  # no X-Agent-Id
    r = await service.put(f"{SM}/agent/k", json={"value": 1})
    assert r.status_code == 400 and r.json()["error"]["code"] == "agent_id_required"


async def test_ten_concurrent_cas_writers_exactly_one_wins(client, db):
    first = await client.put(
        f"{SM}/workflow/counter", params={"scope_id": "run"}, json={"value": 0}
    )
    tag = first.headers["etag"]

    async def writer(i: int):
        return await client.put(
            f"{SM}/workflow/counter",
            params={"scope_id": "run"},
            json={"value": i},
            headers={"If-Match": tag},
        )

    results = await asyncio.gather(*(writer(i) for i in range(1, 11)))
    codes = sorted(r.status_code for r in results)
    assert codes == [200] + [409] * 9, codes
    winner = next(r for r in results if r.status_code == 200).json()
    loser = next(r for r in results if r.status_code == 409).json()
    assert loser["error"]["code"] == "version_conflict"
    got = (await client.get(f"{SM}/workflow/counter", params={"scope_id": "run"})).json()
    assert got["version"] == winner["version"]
    stored = await db.scalar(
        sa.text(
            "select convert_from(value, 'UTF8') from shared_memory_entries "
            "where namespace='workflow' and scope_id='run' and storage_key='counter' "
            "and tenant_id = (select tenant_id from shared_memory_entries where ref_id=:r)"
        ),
        {"r": winner["ref_id"]},
    )
    assert json.loads(stored) == got["value"]


async def test_preconditions(client):
    url = f"{SM}/global/pre"
    r = await client.put(url, json={"value": 1}, headers={"If-Match": '"1"'})
    assert r.status_code == 412
    r = await client.put(url, json={"value": 1}, headers={"If-None-Match": "*"})
    assert r.status_code == 201
    assert (
        await client.put(url, json={"value": 2}, headers={"If-None-Match": "*"})
    ).status_code == 412
    assert (
        await client.put(url, json={"value": 2}, headers={"If-Match": "nonsense"})
    ).status_code == 400
    stale = await client.delete(url, headers={"If-Match": '"1"'})
    assert stale.status_code == 409
    ok = await client.delete(url, headers={"If-Match": r.headers["etag"]})
    assert ok.status_code == 204
    assert (await client.get(url)).status_code == 404
    assert (await client.delete(url)).status_code == 404


async def test_gzip_over_one_megabyte_round_trips(client, db, app):
    big = json.dumps([{"row": i, "name": f"item-{i}"} for i in range(60_000)]).encode()
    assert len(big) > 1024 * 1024
    r = await client.put(
        f"{SM}/global/big", content=big, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    # application/json bodies are the {"value": ...} envelope: a bare array is refused...
    assert r.status_code == 422
    r = await client.put(
        f"{SM}/global/big", content=big, headers={"Content-Type": "application/octet-stream"}
    )
    assert r.status_code == 201 and r.json()["compressed"] is True
    row = (
        await db.execute(
            sa.text(
                "select compressed, size_bytes, length(value) as stored from shared_memory_entries "
                "where ref_id = :r"
            ),
            {"r": r.json()["ref_id"]},
        )
    ).one()
    assert row.compressed and row.size_bytes == len(big) and row.stored < len(big) // 3
    # read through PostgreSQL, not the memory tier
    app_state(app).parts[SharedMemoryRuntime].tier.clear()
    got = await client.get(f"{SM}/global/big")
    assert got.content == big and got.headers["x-loom-compressed"] == "true"
    assert got.headers["x-loom-storage-location"] == "postgres"
    small = await client.put(
        f"{SM}/global/small",
        content=b"x" * 1024 * 1024,
        headers={"Content-Type": "application/octet-stream"},
    )
    assert small.json()["compressed"] is False


async def test_corrupted_row_is_detected(client, db, app):
    for key, payload in (("plain", b"hello world" * 10), ("packed", b"abc" * 500_000)):
        r = await client.put(
            f"{SM}/global/{key}",
            content=payload,
            headers={"Content-Type": "application/octet-stream"},
        )
        assert r.status_code == 201
        await db.execute(
            sa.text(
                "update shared_memory_entries set value = overlay(value placing '\\x00'::bytea "
                "from 20 for 1) where ref_id = :r"
            ),
            {"r": r.json()["ref_id"]},
        )
        await db.commit()
        app_state(app).parts[SharedMemoryRuntime].tier.clear()
        before = INTEGRITY_ERRORS._value.get()  # noqa: SLF001
        got = await client.get(f"{SM}/global/{key}")
        assert got.status_code == 500, got.text
        assert got.json()["error"]["code"] == "integrity_error"
        assert INTEGRITY_ERRORS._value.get() == before + 1  # noqa: SLF001
        ref = await client.get(f"/v1/refs/{r.json()['ref_id']}")
        assert ref.status_code == 500 and ref.json()["error"]["code"] == "integrity_error"


async def test_ttl_expiry_and_cleanup(client, db, app):
    r = await client.put(f"{SM}/global/short", json={"value": "soon gone", "ttl_seconds": 1})
    assert r.status_code == 201 and r.json()["expires_at"] is not None
    await client.put(f"{SM}/global/long", json={"value": "stays"})
    assert (await client.get(f"{SM}/global/short")).status_code == 200  # cached now
    await asyncio.sleep(1.1)
    assert (await client.get(f"{SM}/global/short")).status_code == 404
    keys = [i["key"] for i in (await client.get(f"{SM}/global")).json()["items"]]
    assert "short" not in keys and "long" in keys
    async with worker_ctx(app.state.loom.settings) as ctx:
        assert await cleanup_expired_shared_memory(ctx) >= 1
    left = await db.scalar(
        sa.text("select count(*) from shared_memory_entries where ref_id=:r"),
        {"r": r.json()["ref_id"]},
    )
    assert left == 0
    # a new PUT on an expired key is a create
    assert (await client.put(f"{SM}/global/short", json={"value": 1})).status_code == 201


async def test_max_value_size_is_413(client, app):
    settings = app.state.loom.settings
    old = settings.shared_memory_max_value_bytes
    settings.shared_memory_max_value_bytes = 1000
    try:
        r = await client.put(
            f"{SM}/global/huge",
            content=b"x" * 1001,
            headers={"Content-Type": "application/octet-stream"},
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "value_too_large"
        r = await client.put(f"{SM}/global/huge", json={"value": "y" * 2000})
        assert r.status_code == 413
    finally:
        settings.shared_memory_max_value_bytes = old


async def test_list_prefix_and_cursor(client):
    for k in ["party/gold", "party/map", "party/quest", "other"]:
        await client.put(f"{SM}/workflow/{k}", params={"scope_id": "camp"}, json={"value": k})
    seen, cursor = [], None
    while True:
        params = {"scope_id": "camp", "prefix": "party/", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get(f"{SM}/workflow", params=params)).json()
        seen += [i["key"] for i in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == ["party/gold", "party/map", "party/quest"]
    bad = await client.get(f"{SM}/workflow", params={"scope_id": "camp", "cursor": "zzz"})
    assert bad.status_code == 400


async def test_stats_per_namespace(client):
    await client.put(f"{SM}/global/s1", json={"value": "abc"})
    await client.get(f"{SM}/global/s1")
    await client.get(f"{SM}/global/s1")
    await client.put(f"{SM}/agent/mine", json={"value": 1})
    stats = (await client.get(f"{SM}/stats")).json()
    by_ns = {s["namespace"]: s for s in stats["namespaces"]}
    assert by_ns["global"]["keys"] >= 1 and by_ns["global"]["bytes"] >= 5
    assert by_ns["global"]["writes"] >= 1 and by_ns["global"]["reads"] >= 2
    assert by_ns["global"]["hits"] + by_ns["global"]["misses"] >= 2
    assert by_ns["agent"]["keys"] == 1
    assert stats["memory_tier"]["max_bytes"] > 0


async def test_cross_tenant_is_invisible(client, admin_client, app):
    r = await client.put(f"{SM}/global/secret", json={"value": "tenant A"})
    ref_id = r.json()["ref_id"]
    other = await admin_client.post("/v1/tenants", json={"name": f"other-{uuid.uuid4().hex[:8]}"})
    key = await admin_client.post(
        "/v1/api-keys", json={"tenant_id": other.json()["id"], "role": "service"}
    )

    async with make_client(app, key.json()["secret"]) as b:
        assert (await b.get(f"{SM}/global/secret")).status_code == 404
        assert (await b.get(f"/v1/refs/{ref_id}")).status_code == 404
        assert (await b.get(f"{SM}/global")).json()["items"] == []

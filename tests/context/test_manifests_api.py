"""Context manifests over HTTP (issue 30): every build has a context_id; recorded builds
are listed, read, replayed to the same bytes and diffed, only by those who see the session;
a session without audit records nothing."""

import hashlib
import json
import uuid
from typing import Any

import sqlalchemy as sa

from app.manifests import repository as manifest_repository
from app.manifests.hashes import payload_bytes
from tests.support.api import new_session

TURNS = [
    {"role": "user", "content": "Find the invoice for order 42"},
    {
        "role": "assistant",
        "content": "Looking it up.",
        "tool_calls": [{"id": "t1", "name": "lookup", "input": {"order": 42}}],
    },
    {"role": "tool", "tool_use_id": "t1", "content": '{"invoice": "INV-42"}'},
    {"role": "assistant", "content": "Invoice INV-42, 19.50 EUR."},
]


async def _stored(db: Any, session_id: str) -> int:
    return int(
        await db.scalar(
            sa.text("SELECT count(*) FROM context_manifests WHERE session_id = :s"),
            {"s": session_id},
        )
    )


async def _build(client: Any, sid: str, **body: Any) -> dict[str, Any]:
    r = await client.post(f"/v1/sessions/{sid}/context", json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_audit_off_records_nothing_but_every_build_has_an_id(client, db):
    sid = await new_session(client)
    await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURNS})
    ids = set()
    for fmt in ("anthropic", "openai", "raw"):
        body = await _build(client, sid, format=fmt)
        assert uuid.UUID(body["context_id"]) and body["recorded"] is False
        ids.add(body["context_id"])
        # raw answers with the manifest (made, not stored)
        assert (body["manifest"] is not None) == (fmt == "raw")
    body = await _build(client, sid, manifest=True)
    assert body["manifest"]["context_id"] == body["context_id"]
    assert len(ids) == 3
    assert await _stored(db, sid) == 0
    r = await client.get(f"/v1/sessions/{sid}/contexts")
    assert r.status_code == 200 and r.json() == {"items": [], "next_cursor": None}
    r = await client.get(f"/v1/sessions/{sid}/contexts/{body['context_id']}")
    assert r.status_code == 404 and r.json()["error"]["code"] == "context_not_found"


async def test_recorded_build_lists_reads_replays_and_diffs(client, db):
    sid = await new_session(client, audit=True)
    await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURNS})
    first = await _build(client, sid)
    assert first["recorded"] is True and first["manifest"] is None
    await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "And order 43?"}]},
    )
    second = await _build(client, sid, format="openai", manifest=True)
    assert second["recorded"] is True
    m2 = second["manifest"]
    # the response's rendering is what the manifest's hash covers
    assert m2["sha256"]["openai"] == hashlib.sha256(payload_bytes(second)).hexdigest()
    assert [b["key"] for b in m2["blocks"]] == ["msg:1", "msg:2", "msg:3", "msg:4", "msg:5"]
    assert all(b["why"] for b in m2["blocks"])
    assert m2["tokens"] == second["tokens"] and m2["total_tokens"] == second["total_tokens"]
    assert sum(b["tokens"] for b in m2["blocks"]) + m2["tokens"]["overhead"] == m2["total_tokens"]
    assert await _stored(db, sid) == 2

    r = await client.get(f"/v1/sessions/{sid}/contexts", params={"limit": 1})
    assert r.status_code == 200, r.text
    page1 = r.json()
    assert [i["context_id"] for i in page1["items"]] == [second["context_id"]]
    r = await client.get(
        f"/v1/sessions/{sid}/contexts", params={"limit": 1, "cursor": page1["next_cursor"]}
    )
    assert [i["context_id"] for i in r.json()["items"]] == [first["context_id"]]
    assert r.json()["next_cursor"] is None

    r = await client.get(f"/v1/sessions/{sid}/contexts/{second['context_id']}")
    assert r.status_code == 200 and r.json() == m2
    # stored compact (no row columns, plain L1 messages as [seq, role, tokens]), read in full
    row = (
        await db.execute(
            sa.text("SELECT * FROM context_manifests WHERE id = :i"), {"i": second["context_id"]}
        )
    ).one()
    stored = json.loads(json.dumps(row.manifest))
    assert "context_id" not in stored and "usage" not in stored
    l1 = [b for b in m2["blocks"] if b["layer"] == "l1" and b["truncated_to"] is None]
    assert l1 and all(
        [b["sources"][0]["seq"], b["sources"][0]["role"], b["tokens"]] in stored["blocks"]
        for b in l1
    )
    assert len(json.dumps(stored)) < len(json.dumps(m2)) / 2
    assert manifest_repository.row_of(row).manifest == m2

    for fmt in ("anthropic", "openai", "raw"):
        r = await client.post(
            f"/v1/sessions/{sid}/contexts/{first['context_id']}/replay", params={"format": fmt}
        )
        assert r.status_code == 200, r.text
        assert r.json()["sha256"] == r.json()["sha256"]
        got = r.json()
        manifest = (await client.get(f"/v1/sessions/{sid}/contexts/{first['context_id']}")).json()
        assert got["sha256"] == manifest["sha256"][fmt]
    # the first build's own bytes, re-rendered
    r = await client.post(f"/v1/sessions/{sid}/contexts/{first['context_id']}/replay")
    assert r.json()["messages"] == first["messages"] and r.json()["system"] == first["system"]

    r = await client.get(
        f"/v1/sessions/{sid}/contexts/{first['context_id']}/diff/{second['context_id']}"
    )
    assert r.status_code == 200, r.text
    d = r.json()
    assert [a["key"] for a in d["added"]] == ["msg:5"] and d["removed"] == []
    assert d["token_delta"] == second["total_tokens"] - first["total_tokens"]
    assert d["token_delta"] == d["added"][0]["token_delta"]


async def test_replay_names_what_was_erased_or_changed(client, db):
    sid = await new_session(client, audit=True)
    await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURNS})
    built = await _build(client, sid)
    await client.put(
        f"/v1/sessions/{sid}/kernel/tools",
        json={
            "tools": [
                {
                    "name": "lookup",
                    "description": "Find an order.",
                    "input_schema": {"type": "object"},
                }
            ]
        },
    )
    await db.execute(sa.text("DELETE FROM messages WHERE session_id = :s AND seq = 4"), {"s": sid})
    await db.commit()
    r = await client.post(f"/v1/sessions/{sid}/contexts/{built['context_id']}/replay")
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "context_changed"
    assert "msg:4 was erased" in err["details"]["changed"]
    assert any("Kernel changed" in c for c in err["details"]["changed"])


async def test_another_agents_key_gets_404_on_every_route(tenant, client):
    sid = await new_session(client, audit=True)
    await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURNS})
    a = (await _build(client, sid))["context_id"]
    b = (await _build(client, sid))["context_id"]
    other = await tenant.new_client(role="agent", agent_id="agent-2")
    own = await tenant.new_client(role="agent", agent_id="agent-1")
    routes = [
        ("GET", f"/v1/sessions/{sid}/contexts"),
        ("GET", f"/v1/sessions/{sid}/contexts/{a}"),
        ("POST", f"/v1/sessions/{sid}/contexts/{a}/replay"),
        ("GET", f"/v1/sessions/{sid}/contexts/{a}/diff/{b}"),
    ]
    for method, path in routes:
        r = await other.request(method, path)
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["code"] == "session_not_found"
        assert (await own.request(method, path)).status_code == 200, path
    # a context id of another session is not found in this one
    sid2 = await new_session(client, audit=True)
    r = await client.get(f"/v1/sessions/{sid2}/contexts/{a}")
    assert r.status_code == 404 and r.json()["error"]["code"] == "context_not_found"


async def test_deleting_the_session_removes_its_manifests(client, db):
    sid = await new_session(client, audit=True)
    await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURNS})
    await _build(client, sid)
    assert await _stored(db, sid) == 1
    assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 204
    assert await _stored(db, sid) == 0


async def test_record_per_request_and_profile_default(client, db):
    sid = await new_session(client)
    await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURNS})
    assert (await _build(client, sid, record=True))["recorded"] is True
    assert await _stored(db, sid) == 1
    audited = await new_session(client, audit=True)
    assert (await _build(client, audited, record=False))["recorded"] is False
    assert await _stored(db, audited) == 0
    r = await client.put(
        "/v1/agents/agent-1/profile", json={"system_prompt": "You are careful.", "audit": True}
    )
    assert r.status_code in (200, 201), r.text
    assert r.json()["audit"] is True
    sid3 = await new_session(client)
    assert (await client.get(f"/v1/sessions/{sid3}")).json()["config"]["audit"] is True
    body = await _build(client, sid3)
    assert body["recorded"] is True
    rom = (await client.get(f"/v1/sessions/{sid3}/contexts/{body['context_id']}")).json()
    assert rom["blocks"][0]["key"] == "rom" and rom["versions"]["rom_profile_version"] == 1
    assert rom["blocks"][0]["cache_control"] == {"type": "ephemeral"}


async def test_bad_input_is_a_clear_error(client):
    sid = await new_session(client)
    for body in ({"record": "yes"}, {"manifest": 1}):
        r = await client.post(f"/v1/sessions/{sid}/context", json=body)
        assert r.status_code == 422, r.text
    r = await client.get(f"/v1/sessions/{sid}/contexts", params={"cursor": "nope"})
    assert r.status_code == 400
    r = await client.get(f"/v1/sessions/{sid}/contexts/not-a-uuid")
    assert r.status_code == 422
    r = await client.post(
        f"/v1/sessions/{sid}/contexts/{uuid.uuid4()}/replay", params={"format": "xml"}
    )
    assert r.status_code == 422

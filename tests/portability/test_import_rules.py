"""An import checks its lines like the API and never writes into what exists (issue 36).

1. Re-importing a session's own export with one more message line writes nothing into the
   live session: the message is counted as already present, the history and the next
   context are unchanged, and the session still takes appends. The same for a memory
   item's versions and the session's shared memory.
2. Each value the API refuses is refused in an import too: 422 `invalid_import` naming
   the line and the field, and nothing of the request is written.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.portability.test_export_import import do_import, export, fresh_tenant


async def _session_with_history(client: httpx.AsyncClient) -> str:
    r = await client.post("/v1/sessions", json={"user_id": f"u-{uuid.uuid4().hex[:6]}"})
    sid = r.json()["id"]
    turns = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "my order is 42"},
        {"role": "assistant", "content": "noted"},
    ]
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": turns})
    assert r.status_code == 201, r.text
    return str(sid)


def _with_end(objs: list[dict[str, Any]]) -> list[str]:
    counts: dict[str, int] = {}
    for o in objs[1:-1]:
        counts[o["t"]] = counts.get(o["t"], 0) + 1
    return [json.dumps(o) for o in objs[:-1]] + [json.dumps({"t": "end", "counts": counts})]


async def test_a_reimport_never_writes_into_a_live_session(client: httpx.AsyncClient) -> None:
    sid = await _session_with_history(client)
    before = (await client.post(f"/v1/sessions/{sid}/context", json={})).json()
    before.pop("context_id")
    objs = [json.loads(x) for x in await export(client, f"/v1/sessions/{sid}/export")]
    extra = {**next(o for o in objs if o["t"] == "message"), "seq": 5, "content": "INJECTED"}
    objs.insert(-1, extra)
    r = await do_import(client, _with_end(objs))
    assert r.status_code == 200, r.text
    assert r.json()["inserted"].get("message", 0) == 0
    assert r.json()["already_present"]["session"] == 1
    assert r.json()["already_present"]["message"] == 5  # the four and the injected one
    page = (await client.get(f"/v1/sessions/{sid}/messages")).json()
    assert [m["seq"] for m in page["items"]] == [1, 2, 3, 4]
    assert "INJECTED" not in json.dumps(page)
    after = (await client.post(f"/v1/sessions/{sid}/context", json={})).json()
    after.pop("context_id")
    assert after == before
    r = await client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "next"}]}
    )
    assert r.status_code == 201, r.text
    assert r.json()["last_seq"] == 5
    page = (await client.get(f"/v1/sessions/{sid}/messages")).json()
    assert [(m["seq"], m["content"]) for m in page["items"]][-1] == (5, "next")


async def test_a_present_item_keeps_its_versions(client: httpx.AsyncClient) -> None:
    user = f"iv-{uuid.uuid4().hex[:6]}"
    r = await client.post("/v1/sessions", json={"user_id": user})
    r = await client.post(
        "/v1/memory-items", json={"scope": f"user/{user}", "kind": "fact", "text": "Likes tea."}
    )
    item = r.json()["id"]
    objs = [json.loads(x) for x in await export(client, f"/v1/users/{user}/export")]
    version = next(o for o in objs if o["t"] == "memory_item_version")
    objs.insert(-1, {**version, "version": 2, "text": "Likes coffee.", "change": "update"})
    r = await do_import(client, _with_end(objs))
    assert r.status_code == 200, r.text
    assert r.json()["already_present"]["memory_item_version"] == 2
    history = (await client.get(f"/v1/memory-items/{item}/history")).json()
    assert [v["text"] for v in history["versions"]] == ["Likes tea."]


BAD: list[tuple[str, str, Any, str]] = [
    # (kind of line, field, value, the field the error names)
    ("session", "created_at", "4713-01-01 00:00:00+00 BC", "created_at"),
    ("session", "created_at", "200000-01-01T00:00:00+00:00", "created_at"),
    ("session", "config", {"max_context_tokens": "abc", "l1_max_messages": -5}, "config"),
    ("session", "config", [1, 2], "config"),
    ("session", "config", {"max_context_tokens": 1, "reserved_output_tokens": 5}, "config"),
    ("session", "metadata", "DEEP", "line"),
    ("session", "agent_id", "a b", "agent_id"),
    ("session", "user_id", "../x y", "user_id"),
    ("message", "content", "DEEP", "line"),
    ("message", "content", 5, "content"),
    ("message", "tool_calls", "x", "tool_calls"),
    ("message", "role", "hacker", "role"),
    ("message", "seq", -1, "seq"),
    ("message", "seq", 0, "seq"),
    ("message", "seq", "1", "seq"),
    ("message", "created_at", "2999-01-01T00:00:00+00:00", "created_at"),
    ("memory_state", "l1_start_seq", "x", "l1_start_seq"),
    ("memory_state", "rom", {"system_prompt": 5}, "rom"),
]


def _deep(n: int) -> Any:
    value: Any = "x"
    for _ in range(n):
        value = {"d": value}
    return value


@pytest.mark.parametrize("kind,field,value,named", BAD, ids=[f"{b[0]}.{b[1]}" for b in BAD])
async def test_what_the_api_refuses_an_import_refuses(
    client: httpx.AsyncClient,
    tenant: Any,
    app: Any,
    db: Any,
    kind: str,
    field: str,
    value: Any,
    named: str,
) -> None:
    sid = await _session_with_history(client)
    objs = [json.loads(x) for x in await export(client, f"/v1/sessions/{sid}/export")]
    line = next(i for i, o in enumerate(objs) if o["t"] == kind)
    objs[line][field] = _deep(900) if value == "DEEP" else value
    target = await fresh_tenant(tenant, app)
    async with target:
        r = await do_import(target, _with_end(objs))
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "invalid_import"
        assert err["details"]["line"] == line + 1, err
        assert (err["details"]["field"] or "line").split(".")[0] == named, err
        assert f"line {line + 1}" in err["message"]
        me = (await target.get("/v1/me")).json()
        for table in ("sessions", "messages", "memory_states"):
            n = (
                await db.execute(
                    sa.text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"),
                    {"t": me["tenant_id"]},
                )
            ).scalar_one()
            assert n == 0, table
        # the same export unmutated goes in whole, and reads back
        clean = [json.loads(x) for x in await export(client, f"/v1/sessions/{sid}/export")]
        r = await do_import(target, _with_end(clean))
        assert r.status_code == 200, r.text
        assert (await target.get(f"/v1/sessions/{sid}")).status_code == 200

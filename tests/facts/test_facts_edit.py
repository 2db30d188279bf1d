"""People correct facts (issue 27): `PATCH /v1/memory-items/{id}` with If-Match; every
change by any path is a version saying who, when and why; `as_of` on packages, search and
history; unknown query parameters are refused across the API."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import sqlalchemy as sa

from tests.facts.helpers import extract, history, scope_facts, talk
from tests.facts.support import FactModel, Rule, facts_session
from tests.fakes.llm_server import FakeLLMServer


async def test_a_manual_item_patched_with_its_history(
    client: httpx.AsyncClient, tenant: Any, db: Any
) -> None:
    r = await client.post(
        "/v1/memory-items",
        json={"scope": "agent", "kind": "fact", "text": "The user lives in Pariss."},
    )
    assert r.status_code == 201, r.text
    item = r.json()
    assert item["version"] == 1 and item["valid_from"] is not None  # valid from now
    got = await client.get(f"/v1/memory-items/{item['id']}")
    assert got.headers["etag"] == '"1"'
    url = f"/v1/memory-items/{item['id']}"

    r = await client.patch(url, json={"text": "The user lives in Paris."})
    assert r.status_code == 428 and r.json()["error"]["code"] == "if_match_required"
    r = await client.patch(url, json={"text": "x"}, headers={"If-Match": '"7"'})
    assert r.status_code == 409 and r.json()["error"]["code"] == "version_conflict"
    assert r.json()["error"]["details"]["current_version"] == 1
    r = await client.patch(url, json={}, headers={"If-Match": '"1"'})
    assert r.status_code == 422
    r = await client.patch(
        url,
        json={"valid_from": "2026-03-01T00:00:00Z", "invalid_at": "2026-02-01T00:00:00Z"},
        headers={"If-Match": '"1"'},
    )
    assert r.status_code == 422
    r = await client.patch(
        url,
        json={
            "text": "The user lives in Paris.",
            "key": "user.home_city",
            "valid_from": "2026-01-10T00:00:00Z",
            "importance": 0.9,
            "reason": "typo in the city",
        },
        headers={"If-Match": '"1"'},
    )
    assert r.status_code == 200, r.text
    assert r.headers["etag"] == '"2"'
    fixed = r.json()
    assert (fixed["text"], fixed["key"], fixed["version"], fixed["importance"]) == (
        "The user lives in Paris.",
        "user.home_city",
        2,
        0.9,
    )
    assert fixed["token_cost"] > 0
    # stale If-Match after the change
    r = await client.patch(url, json={"importance": 0.1}, headers={"If-Match": '"1"'})
    assert r.status_code == 409
    # it is no longer true: invalid_at by PATCH too
    r = await client.patch(
        url,
        json={"invalid_at": "2026-03-01T00:00:00Z", "reason": "moved"},
        headers={"If-Match": '"2"'},
    )
    assert r.status_code == 200 and r.json()["invalid_at"].startswith("2026-03-01")

    h = await history(client, item["id"])
    assert [
        (v["version"], v["change"], v["text"], v["reason"], v["actor"], v["actor_agent_id"])
        for v in h["versions"]
    ] == [
        (1, "add", "The user lives in Pariss.", "written", "api", "agent-1"),
        (2, "edit", "The user lives in Paris.", "typo in the city", "api", "agent-1"),
        (3, "edit", "The user lives in Paris.", "moved", "api", "agent-1"),
    ]
    key_id = (await client.get("/v1/me")).json().get("key_id")
    assert all(v["actor_key_id"] is not None for v in h["versions"])
    if key_id:
        assert {v["actor_key_id"] for v in h["versions"]} == {key_id}
    # what was true when: the corrected text rewrote the past from its valid_from
    h = (
        await client.get(
            f"/v1/memory-items/{item['id']}/history", params={"as_of": "2026-02-01T00:00:00Z"}
        )
    ).json()
    assert h["as_of_version"]["text"] == "The user lives in Paris."
    h = (
        await client.get(
            f"/v1/memory-items/{item['id']}/history", params={"as_of": "2026-03-02T00:00:00Z"}
        )
    ).json()
    assert h["as_of_version"] is None  # not true any more then

    # deleting writes a last version (kept, as an audit log)
    assert (await client.delete(url)).status_code == 204
    rows = (
        await db.execute(
            sa.text(
                "SELECT version, change, reason FROM memory_item_versions WHERE tenant_id = :t "
                "AND item_id = :i ORDER BY version"
            ),
            {"t": uuid.UUID(tenant.id), "i": uuid.UUID(item["id"])},
        )
    ).all()
    assert [tuple(r) for r in rows][-1] == (4, "delete", "deleted")


async def test_clear_promote_and_forget_write_versions(
    client: httpx.AsyncClient, tenant: Any, db: Any
) -> None:
    ids = []
    for text in ("a", "b"):
        r = await client.post(
            "/v1/memory-items", json={"scope": "task/t1", "kind": "note", "text": text}
        )
        ids.append(r.json()["id"])
    r = await client.post(f"/v1/memory-items/{ids[0]}/promote", json={"project_id": "p1"})
    assert r.status_code == 200 and r.json()["version"] == 2
    r = await client.post("/v1/memory-items/clear", json={"scope": "task/t1"})
    assert r.json()["removed"] == 1
    rows = (
        await db.execute(
            sa.text(
                "SELECT item_id, change FROM memory_item_versions WHERE tenant_id = :t "
                "ORDER BY item_id, version"
            ),
            {"t": uuid.UUID(tenant.id)},
        )
    ).all()
    changes = {str(i): [c for j, c in rows if j == i] for i, _ in rows}
    assert changes[ids[0]] == ["add", "promote"] and changes[ids[1]] == ["add", "delete"]


async def test_search_facts_and_packages_answer_as_of(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(
        FactModel(
            [
                Rule("in Paris", "The user lives in Paris.", "user.home_city"),
                Rule("in Rome", "The user lives in Rome.", "user.home_city"),
            ]
        )
    )
    sid = await facts_session(llm_client, scope="project/trip")
    await talk(
        llm_client,
        sid,
        ("2026-01-10T09:00:00Z", "I live in Paris."),
        ("2026-04-10T09:00:00Z", "Now I live in Rome."),
    )
    await extract(llm_client, sid)

    async def search(**args: Any) -> list[str]:
        r = await llm_client.post(
            f"/v1/sessions/{sid}/tool-calls",
            json={
                "type": "tool_use",
                "id": "toolu_1",
                "name": "search_facts",
                "input": {"query": "where does the user live", **args},
            },
        )
        assert r.status_code == 200, r.text
        return [f["text"] for f in json.loads(r.json()["content"])["facts"]]

    assert await search() == ["The user lives in Rome."]
    assert await search(as_of="2026-02-01T00:00:00Z") == ["The user lives in Paris."]
    pkg = (
        await llm_client.post(
            "/v1/context-packages",
            json={"project_id": "trip", "budget_tokens": 500, "as_of": "2026-02-01T00:00:00Z"},
        )
    ).json()
    assert [i["text"] for i in pkg["items"]] == ["The user lives in Paris."]
    now = (
        await llm_client.post(
            "/v1/context-packages", json={"project_id": "trip", "budget_tokens": 500}
        )
    ).json()
    assert [i["text"] for i in now["items"]] == ["The user lives in Rome."]
    assert [
        f["text"]
        for f in await scope_facts(llm_client, "project/trip", as_of="2026-05-01T00:00:00Z")
    ] == ["The user lives in Rome."]


async def test_unknown_query_parameters_are_refused(client: httpx.AsyncClient) -> None:
    body = {"filters": {"kind": "fact"}}
    r = await client.post(
        "/v1/memory-items/query", params={"asof": "2026-01-01T00:00:00Z"}, json=body
    )
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "unknown_query_parameter" and "asof" in err["message"]
    assert "as_of" in err["message"]  # the ones it accepts are named
    assert err["details"] == [
        {
            "loc": ["query", "asof"],
            "msg": "unknown query parameter",
            "type": "unknown_query_parameter",
        }
    ]
    assert (
        await client.post(
            "/v1/memory-items/query", params={"as_of": "2026-01-01T00:00:00Z"}, json=body
        )
    ).status_code == 200
    # everywhere under /v1, including routes with no query parameters at all
    sid = (await client.post("/v1/sessions", json={})).json()["id"]
    r = await client.get(f"/v1/sessions/{sid}", params={"verbose": "1"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_query_parameter"
    assert (await client.get(f"/v1/sessions/{sid}")).status_code == 200
    r = await client.get("/v1/jobs", params={"kind": "facts", "colour": "red"})
    assert r.status_code == 422 and "colour" in r.json()["error"]["message"]

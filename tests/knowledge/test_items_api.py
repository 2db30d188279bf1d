"""Memory items over HTTP: CRUD, every filter operator (checked against the Python
oracle), ordering and cursors, isolation, promotion, task completion, clear."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest

from app.knowledge.filters import matches, parse_query

SPECS = [  # (scope, kind, source, tags, importance, text)
    ("project/p1", "decision", "alice", ["db", "perf"], 0.9, "use postgres"),
    ("project/p1", "convention", "bob", ["style"], 0.8, "snake_case everywhere"),
    ("project/p1", "failure", "alice", ["db", "bug_fix"], 0.85, "deadlock on upsert"),
    ("project/p1", "decision", "carol", [], 0.3, "tabs are fine"),
    ("project/p2", "decision", "alice", ["db"], 0.95, "use mysql"),
    ("task/t1", "reasoning", "agent", ["task", "s1"], 0.5, "try index first"),
    ("task/t1", "tool_output", "agent", ["task", "tool"], 0.7, None),
    ("global", "preference", "user", ["style", "verbosity"], 0.9, "be terse"),
    ("global", "pattern", "user", ["ros"], 0.7, "explain launch changes"),
]


async def _create(
    client,
    scope: str,
    kind: str = "note",
    *,
    importance: float = 0.5,
    text: str | None = "x",
    tags: list[str] | None = None,
    **extra: Any,
) -> dict:
    body = {"scope": scope, "kind": kind, "importance": importance, "tags": tags or [], **extra}
    if text is not None:
        body["text"] = text
    if "payload" not in body and text is None:
        body["payload"] = {"k": kind}
    r = await client.post("/v1/memory-items", json=body)
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture
async def corpus(client) -> list[dict]:
    out = []
    for scope, kind, source, tags, imp, text in SPECS:
        out.append(
            await _create(client, scope, kind, importance=imp, text=text, tags=tags, source=source)
        )
    return out


def _record(item: dict) -> dict:
    rec = dict(item)
    rec["id"] = uuid.UUID(item["id"])
    for f in ("created_at", "updated_at"):
        rec[f] = datetime.fromisoformat(item[f].replace("Z", "+00:00"))
    return rec


async def _ids(client, filters: dict, **kw: Any) -> list[str]:
    r = await client.post("/v1/memory-items/query", json={"filters": filters, **kw})
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json()["items"]]


async def test_create_get_delete(client) -> None:
    item = await _create(client, "project/p1", "decision", text="use postgres", tags=["a", "a"])
    assert item["scope"] == "project/p1" and item["tags"] == ["a"] and item["token_cost"] > 2
    r = await client.get(f"/v1/memory-items/{item['id']}")
    assert r.status_code == 200 and r.json() == item
    assert (await client.delete(f"/v1/memory-items/{item['id']}")).status_code == 204
    assert (await client.get(f"/v1/memory-items/{item['id']}")).status_code == 404
    assert (await client.delete(f"/v1/memory-items/{item['id']}")).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"scope": "project/", "kind": "k", "text": "t"},
        {"scope": "team/x", "kind": "k", "text": "t"},
        {"scope": "global", "kind": "k"},
        {"scope": "global", "kind": "k", "text": "t", "importance": 2},
        {"scope": "global", "kind": "", "text": "t"},
        {"scope": "global", "kind": "k", "text": "t", "x": 1},
    ],
)
async def test_create_rejects_bad_input(client, body: dict) -> None:
    r = await client.post("/v1/memory-items", json=body)
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"


FILTERS = [
    {"kind": "decision"},
    {"kind": ["decision", "failure"]},
    {"kind": {"$ne": "decision"}},
    {"kind": {"$ne": ["decision", "pattern"]}},
    {"source": "alice"},
    {"tags": ["db"]},
    {"tags": ["perf", "ros"]},
    {"tags": "style"},
    {"tags": {"$ne": "db"}},
    {"tags": {"$eq": ["bug_fix", "verbosity"]}},
    {"importance": 0.9},
    {"importance": {"$eq": 0.85}},
    {"importance": {"$ne": 0.9}},
    {"importance": {"$gt": 0.8}},
    {"importance": {"$gte": 0.8}},
    {"importance": {"$lt": 0.7}},
    {"importance": {"$lte": 0.7}},
    {"importance": {"$gt": 0.5, "$lte": 0.9}},
    {"token_cost": {"$gte": 1}},
    {"text": None},
    {"text": {"$ne": None}},
    {"scope": "project/p1"},
    {"scope": ["task/t1", "global"]},
    {"scope": {"$ne": "project/p1"}},
    {"scope": "project/p1", "kind": "decision", "tags": ["db"], "importance": {"$gte": 0.5}},
    {"created_at": {"$gte": "2000-01-01T00:00:00Z"}},
    {"timestamp": {"$lt": "2000-01-01"}},
]


@pytest.mark.parametrize("filters", FILTERS)
async def test_each_filter_matches_the_reference_semantics(client, corpus, filters) -> None:
    expected = {i["id"] for i in corpus if matches(parse_query(filters), _record(i))}
    assert set(await _ids(client, filters)) == expected


async def test_a_fractional_number_on_token_cost_is_compared_as_it_is(client, corpus) -> None:
    # token_cost is an integer column: a filter's 1.5 must not become 1
    cost = min(i["token_cost"] for i in corpus)
    for filters in (
        {"token_cost": {"$lt": cost + 0.5}},
        {"token_cost": {"$lte": cost - 0.5}},
        {"token_cost": {"$gt": cost - 0.5}},
        {"token_cost": [cost + 0.5]},
        {"token_cost": {"$ne": [cost + 0.5]}},
        {"token_cost": cost + 0.5},
    ):
        expected = {i["id"] for i in corpus if matches(parse_query(filters), _record(i))}
        assert set(await _ids(client, filters)) == expected, filters
    assert await _ids(client, {"token_cost": {"$lt": cost + 0.5}})


async def test_filter_examples_by_hand(client, corpus) -> None:
    by_text = {i["text"]: i["id"] for i in corpus}
    assert set(await _ids(client, {"tags": ["db"], "scope": "project/p1"})) == {
        by_text["use postgres"],
        by_text["deadlock on upsert"],
    }
    assert await _ids(client, {"importance": {"$gt": 0.9}}) == [by_text["use mysql"]]


async def test_unknown_fields_and_operators_are_422_listing_them(client, corpus) -> None:
    r = await client.post(
        "/v1/memory-items/query",
        json={"filters": {"colour": "red", "importance": {"$regex": "x"}}, "order_by": "tags"},
    )
    assert r.status_code == 422
    locs = {tuple(d["loc"]) for d in r.json()["error"]["details"]}
    assert locs == {
        ("body", "filters", "colour"),
        ("body", "filters", "importance", "$regex"),
        ("body", "order_by"),
    }


@pytest.mark.parametrize(
    "order_by,key,reverse",
    [
        ("importance", "importance", True),
        ("-importance", "importance", False),
        ("timestamp", "created_at", True),
        ("-created_at", "created_at", False),
        ("token_cost", "token_cost", True),
    ],
)
async def test_order_by_and_cursor_pages(client, corpus, order_by, key, reverse) -> None:
    seen: list[dict] = []
    cursor = None
    for _ in range(10):
        r = await client.post(
            "/v1/memory-items/query", json={"order_by": order_by, "limit": 2, "cursor": cursor}
        )
        assert r.status_code == 200, r.text
        seen += r.json()["items"]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(corpus) and len({i["id"] for i in seen}) == len(corpus)

    def sort_key(i):
        return (_record(i)[key], uuid.UUID(i["id"]))

    assert seen == sorted(seen, key=sort_key, reverse=reverse)


async def test_cursor_from_another_order_is_400(client, corpus) -> None:
    r = await client.post("/v1/memory-items/query", json={"order_by": "importance", "limit": 1})
    cursor = r.json()["next_cursor"]
    r = await client.post(
        "/v1/memory-items/query", json={"order_by": "-importance", "cursor": cursor}
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_cursor"
    r = await client.post("/v1/memory-items/query", json={"cursor": "garbage!"})
    assert r.status_code == 400


async def test_projects_and_tenants_are_isolated(client, tenant, admin_client, corpus) -> None:
    p2 = {i["id"] for i in corpus if i["scope"] == "project/p2"}
    assert set(await _ids(client, {"scope": "project/p2"})) == p2
    assert not set(await _ids(client, {"scope": "project/p1"})) & p2
    pkg = (
        await client.post(
            "/v1/context-packages",
            json={"project_id": "p1", "include_global": False, "budget_tokens": 10_000},
        )
    ).json()
    assert {i["scope"] for i in pkg["items"]} == {"project/p1"}
    # another tenant sees nothing of ours, whatever ids it sends
    r = await admin_client.post("/v1/tenants", json={"name": f"other-{uuid.uuid4().hex[:6]}"})
    key = await admin_client.post(
        "/v1/api-keys", json={"tenant_id": r.json()["id"], "role": "service"}
    )
    other = tenant.client_for(key.json()["secret"])
    item_id = corpus[0]["id"]
    assert (await other.get(f"/v1/memory-items/{item_id}")).status_code == 404
    assert (await other.delete(f"/v1/memory-items/{item_id}")).status_code == 404
    assert (await other.post(f"/v1/memory-items/{item_id}/promote")).status_code == 404
    assert (await other.post("/v1/memory-items/query", json={})).json()["items"] == []
    r = await other.post("/v1/memory-items/clear", json={"scope": "project/p1"})
    assert r.json()["removed"] == 0
    assert (await client.get(f"/v1/memory-items/{item_id}")).status_code == 200


async def test_promote_task_to_project_to_global(client) -> None:
    item = await _create(client, "task/t9", "lesson", importance=0.8)
    r = await client.post(f"/v1/memory-items/{item['id']}/promote", json={})
    assert r.status_code == 409 and r.json()["error"]["code"] == "cannot_promote"
    r = await client.post(f"/v1/memory-items/{item['id']}/promote", json={"project_id": "p9"})
    assert r.status_code == 200 and r.json()["scope"] == "project/p9"
    assert r.json()["id"] == item["id"]
    r = await client.post(f"/v1/memory-items/{item['id']}/promote")
    assert r.status_code == 200 and r.json()["scope"] == "global"
    r = await client.post(f"/v1/memory-items/{item['id']}/promote")
    assert r.status_code == 409
    stored = (await client.get(f"/v1/memory-items/{item['id']}")).json()
    assert stored["scope"] == "global"


async def test_task_completion_promotes_listed_and_clears_the_rest(client) -> None:
    keep = await _create(client, "task/t1", "lesson", importance=0.9, text="keep me")
    drop = [await _create(client, "task/t1", "scratch") for _ in range(3)]
    other_task = await _create(client, "task/t2", "scratch")
    r = await client.post(
        "/v1/tasks/t1/complete", json={"promote": [keep["id"]], "project_id": "p1"}
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"task_id": "t1", "promoted": [keep["id"]], "cleared": 3, "evicted": 0}
    assert (await client.get(f"/v1/memory-items/{keep['id']}")).json()["scope"] == "project/p1"
    for d in drop:
        assert (await client.get(f"/v1/memory-items/{d['id']}")).status_code == 404
    assert await _ids(client, {"scope": "task/t1"}) == []
    assert await _ids(client, {"scope": "task/t2"}) == [other_task["id"]]
    # retry is safe
    r = await client.post(
        "/v1/tasks/t1/complete", json={"promote": [keep["id"]], "project_id": "p1"}
    )
    assert r.status_code == 200 and r.json()["cleared"] == 0


async def test_task_completion_refuses_foreign_items_and_changes_nothing(client) -> None:
    mine = await _create(client, "task/t1", "scratch")
    scratch = await _create(client, "task/t1", "scratch")  # a completion would clear it
    foreign = await _create(client, "task/t2", "scratch")

    async def items() -> list[dict]:
        got = [await client.get(f"/v1/memory-items/{i['id']}") for i in (mine, scratch, foreign)]
        assert [g.status_code for g in got] == [200, 200, 200]
        return [g.json() for g in got]

    before = await items()
    r = await client.post(
        "/v1/tasks/t1/complete",
        json={"promote": [mine["id"], foreign["id"]], "project_id": "p1"},
    )
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "memory_item_not_found"
    assert r.json()["error"]["details"] == {"ids": [foreign["id"]]}
    assert await items() == before  # nothing promoted, nothing cleared, nothing touched
    assert await _ids(client, {"scope": "project/p1"}) == []
    r = await client.post("/v1/tasks/t1/complete", json={"promote": [mine["id"]]})
    assert r.status_code == 422  # project_id missing
    assert r.json()["error"]["code"] == "validation_error"
    assert await items() == before


async def test_clear_global_needs_confirmation(client) -> None:
    for _ in range(3):
        await _create(client, "global", "preference")
    await _create(client, "project/p1", "decision")
    r = await client.post("/v1/memory-items/clear", json={"scope": "global"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "confirmation_required"
    assert len(await _ids(client, {"scope": "global"})) == 3
    r = await client.post("/v1/memory-items/clear", json={"scope": "global", "confirm": True})
    assert r.status_code == 200 and r.json() == {"scope": "global", "removed": 3}
    assert await _ids(client, {"scope": "global"}) == []
    assert len(await _ids(client, {"scope": "project/p1"})) == 1


async def test_clear_project_with_filter(client) -> None:
    await _create(client, "project/p1", "decision", importance=0.2)
    keep = await _create(client, "project/p1", "decision", importance=0.9)
    r = await client.post(
        "/v1/memory-items/clear",
        json={"scope": "project/p1", "filters": {"importance": {"$lt": 0.5}}},
    )
    assert r.json()["removed"] == 1
    assert await _ids(client, {"scope": "project/p1"}) == [keep["id"]]

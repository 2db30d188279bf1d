"""The server does what its OpenAPI document says (regressions found by schemathesis)."""

import pytest

from tests.support.api import create_session


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", "/v1/sessions", {"GET", "POST"}),
        ("PUT", "/v1/sessions/00000000-0000-0000-0000-000000000000", {"GET", "PATCH", "DELETE"}),
        ("OPTIONS", "/v1/agents/a1/learned", {"GET", "PUT"}),
        ("OPTIONS", "/v1/api-keys", {"GET", "POST"}),
        (
            "PUT",
            "/v1/memory-items/00000000-0000-0000-0000-000000000000",
            {"GET", "PATCH", "DELETE"},
        ),
        # literal siblings of /memory-items/{item_id} are not an item id (was 422)
        ("GET", "/v1/memory-items/clear", {"POST"}),
        ("GET", "/v1/memory-items/query", {"POST"}),
    ],
)
async def test_405_allow_lists_every_method_of_the_path(client, method, path, allowed):
    resp = await client.request(method, path)
    assert resp.status_code == 405, resp.text
    assert resp.json()["error"]["code"] == "method_not_allowed"
    assert set(resp.headers["allow"].split(", ")) - {"HEAD"} == allowed


async def test_non_uuid_item_id_is_not_found(client):
    """No route matches a path whose item id is not a UUID (`{item_id:uuid}`): the generic
    404 of an unknown path, not a 422 about the id."""
    resp = await client.get("/v1/memory-items/not-a-uuid")
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/search", {"query": "x", "rerank": 0}),
        ("/v1/search", {"query": "x", "limit": True}),
        ("/v1/search", {"query": "x", "limit": "5"}),
        ("/v1/context-packages", {"budget_tokens": 100, "head_tail": False}),
        ("/v1/context-packages", {"budget_tokens": 100, "shares": {"task": True}}),
        ("/v1/agents/agent-1/learned/rollback", {"to_version": True}),
        ("/v1/memory-items/query", {"limit": 1.5}),
    ],
)
async def test_json_bodies_take_json_types_only(client, path, body):
    """No lax coercion in JSON bodies: `0` is not false, `true` is not 1, `"5"` is not 5."""
    resp = await client.post(path, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["code"] == "validation_error"


async def test_whole_floats_are_integers(client):
    """JSON Schema counts 2.0 as the integer 2, so the server does too."""
    resp = await client.post("/v1/memory-items/query", json={"limit": 2.0})
    assert resp.status_code == 200, resp.text


async def test_promote_seqs_must_be_integers(client):
    session = await create_session(client)
    resp = await client.post(f"/v1/sessions/{session['id']}/memory/promote", json={"seqs": [False]})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["code"] == "validation_error"


async def test_scope_id_length_agrees_with_the_schema(client, app):
    from app.shared_memory.keys import MAX_SCOPE_CHARS

    params = app.openapi()["paths"]["/v1/shared-memory/{namespace}/{key}"]["get"]["parameters"]
    scope = next(p for p in params if p["name"] == "scope_id")["schema"]
    assert scope["anyOf"][0]["maxLength"] == MAX_SCOPE_CHARS == 128
    ok = await client.put(
        "/v1/shared-memory/workflow/k", params={"scope_id": "w" * 128}, json={"value": 1}
    )
    assert ok.status_code == 201, ok.text
    too_long = await client.put(
        "/v1/shared-memory/workflow/k", params={"scope_id": "w" * 129}, json={"value": 1}
    )
    assert too_long.status_code == 422, too_long.text
    assert too_long.json()["error"]["code"] == "validation_error"


async def test_malformed_if_match_is_400_even_for_a_missing_entry(client):
    resp = await client.delete("/v1/shared-memory/global/missing", headers={"If-Match": "v1"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_etag"
    resp = await client.delete("/v1/shared-memory/global/missing", headers={"If-Match": '"1"'})
    assert resp.status_code == 412, resp.text
    assert resp.json()["error"]["code"] == "precondition_failed"


async def test_metadata_header_is_checked_whatever_the_body(client):
    resp = await client.put(
        "/v1/shared-memory/global/m", json={"value": 1}, headers={"X-Loom-Metadata": "[1]"}
    )
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_metadata"

"""The server does what its OpenAPI document says (regressions found by schemathesis)."""

import pytest


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("OPTIONS", "/v1/sessions", {"GET", "POST"}),
    ("PUT", "/v1/sessions/00000000-0000-0000-0000-000000000000",
     {"GET", "PATCH", "DELETE"}),
    ("OPTIONS", "/v1/agents/a1/learned", {"GET", "PUT"}),
    ("OPTIONS", "/v1/api-keys", {"GET", "POST"}),
    ("PATCH", "/v1/memory-items/00000000-0000-0000-0000-000000000000", {"GET", "DELETE"}),
    # literal siblings of /memory-items/{item_id} are not an item id (was 422)
    ("GET", "/v1/memory-items/clear", {"POST"}),
    ("GET", "/v1/memory-items/query", {"POST"}),
])
async def test_405_allow_lists_every_method_of_the_path(client, method, path, allowed):
    resp = await client.request(method, path)
    assert resp.status_code == 405, resp.text
    assert resp.json()["error"]["code"] == "method_not_allowed"
    assert set(resp.headers["allow"].split(", ")) - {"HEAD"} == allowed


async def test_non_uuid_item_id_is_not_found(client):
    assert (await client.get("/v1/memory-items/not-a-uuid")).status_code == 404

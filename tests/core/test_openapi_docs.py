"""What /docs shows: written summaries, real request examples, and the acting headers."""

from collections.abc import Iterator
from typing import Any

import httpx

from app.core.config import Settings
from app.main import create_app

# Swagger UI's stand-ins when an example is generated from the schema
PLACEHOLDERS = ("string", "additionalProp1")


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            yield method.upper(), path, op


def _placeholders(value: Any, key: str | None = None) -> list[Any]:
    """Placeholder strings and keys inside an example (`"type": "string"` in a JSON Schema
    the example carries is a real value)."""
    if isinstance(value, dict):
        found = [k for k in value if k.startswith("additionalProp")]
        return found + [p for k, v in value.items() for p in _placeholders(v, k)]
    if isinstance(value, list):
        return [p for v in value for p in _placeholders(v, key)]
    return [value] if value in PLACEHOLDERS and key != "type" else []


def test_every_operation_has_a_written_summary(settings: Settings) -> None:
    doc = create_app(settings).openapi()
    for method, path, op in _operations(doc):
        summary = op.get("summary")
        assert summary, f"{method} {path} has no summary"
        derived = op["operationId"].replace("_", " ").title()
        assert summary != derived, f"{method} {path}: summary derived from the function name"


def test_every_json_request_body_has_a_real_example(settings: Settings) -> None:
    doc = create_app(settings).openapi()
    bodies = 0
    for method, path, op in _operations(doc):
        media = op.get("requestBody", {}).get("content", {}).get("application/json")
        if media is None:
            continue
        bodies += 1
        examples = media.get("examples")
        assert examples, f"{method} {path} has no request example"
        for name, example in examples.items():
            assert example.get("summary"), f"{method} {path}: example {name} has no summary"
            found = _placeholders(example["value"])
            assert not found, f"{method} {path}: example {name} holds placeholders {found}"
    assert bodies >= 20


async def test_the_default_append_example_stores_what_it_says(
    app: Any, client: httpx.AsyncClient
) -> None:
    doc = app.openapi()
    op = doc["paths"]["/v1/sessions/{session_id}/messages"]["post"]
    examples = op["requestBody"]["content"]["application/json"]["examples"]
    body = next(iter(examples.values()))["value"]  # the one Swagger UI shows first
    sid = (await client.post("/v1/sessions", json={})).json()["id"]

    resp = await client.post(f"/v1/sessions/{sid}/messages", json=body)
    assert resp.status_code == 201, resp.text
    stored = (await client.get(f"/v1/sessions/{sid}/messages")).json()["items"]

    user, assistant, result = body["messages"][:3]
    tool_use = assistant["content"][1]
    tool_result = result["content"][0]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[0]["content"] == user["content"]
    assert stored[1]["content"] == assistant["content"][:1]  # the text block
    assert stored[1]["tool_calls"] == [{k: tool_use[k] for k in ("id", "name", "input")}]
    assert stored[2]["tool_use_id"] == tool_use["id"]
    assert stored[2]["content"] == tool_result["content"]
    assert stored[3]["content"] == body["messages"][3]["content"]
    assert all(m["content"] != "string" and m["token_count"] > 0 for m in stored)


def test_acting_headers_are_declared_where_they_are_read(settings: Settings) -> None:
    doc = create_app(settings).openapi()
    schemes = doc["components"]["securitySchemes"]
    assert schemes["AgentId"] == {
        **schemes["AgentId"],
        "type": "apiKey",
        "in": "header",
        "name": "X-Agent-Id",
    }
    assert schemes["TenantId"] == {
        **schemes["TenantId"],
        "type": "apiKey",
        "in": "header",
        "name": "X-Tenant-Id",
    }
    paths = doc["paths"]
    acting = paths["/v1/sessions"]["post"]["security"]
    # the bare key suffices (agent keys), each header is an optional addition
    assert acting[0] == {"HTTPBearer": []}
    assert {"HTTPBearer": [], "AgentId": []} in acting
    assert {"HTTPBearer": [], "TenantId": []} in acting
    assert paths["/v1/api-keys"]["get"]["security"] == [
        {"HTTPBearer": []},
        {"HTTPBearer": [], "TenantId": []},
    ]
    assert paths["/v1/tenants"]["post"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in paths["/healthz"]["get"]
    for method, path, op in _operations(doc):
        if path == "/v1/tenants/{tenant_id}/budget":
            # the tenant is named in the path, as for the tenants' routes
            assert op["security"] == [{"HTTPBearer": []}], f"{method} {path}"
        elif path.startswith("/v1/") and path not in (
            "/v1/tenants",
            "/v1/api-keys",
            "/v1/api-keys/{key_id}",
        ):
            assert op["security"] == acting, f"{method} {path}"


async def test_the_headers_work_as_swagger_sends_them(app: Any, tenant: Any) -> None:
    """Authorize with a service key and an agent id: Swagger UI sends both headers."""
    headers = {"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "planner"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
    ) as c:
        resp = await c.post("/v1/sessions", json={})
        assert resp.status_code == 201 and resp.json()["agent_id"] == "planner"
        # a service key's X-Tenant-Id is ignored on the key routes, as everywhere else
        keys = await c.get("/v1/api-keys", headers={"X-Tenant-Id": "not-a-tenant"})
        assert keys.status_code == 200, keys.text

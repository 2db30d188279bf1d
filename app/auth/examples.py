"""Request examples of the tenants and keys API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

TENANT: dict[str, Example] = {
    "acme": Example(
        summary="A tenant whose text is English",
        value={"name": "acme", "text_search_config": "english"},
    ),
}

API_KEY: dict[str, Example] = {
    "agent_key": Example(
        summary="An agent key, bound to one agent (service or admin key)",
        description="A service key mints it for its own tenant; an admin key names the "
        "tenant with `tenant_id` or X-Tenant-Id.",
        value={"role": "agent", "agent_id": "planner", "name": "planner runtime"},
    ),
    "service_key": Example(
        summary="A service key for a tenant (admin key)",
        description="`tenant_id` is the `id` POST /v1/tenants returned.",
        value={
            "tenant_id": "5f0c2a4e-9b1d-4c3e-8f7a-2d6b1e9c0a35",
            "role": "service",
            "name": "agent runtime",
        },
    ),
}

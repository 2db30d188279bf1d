"""Who a request acts as, in the OpenAPI document: X-Agent-Id and X-Tenant-Id.

The two headers are declared as `apiKey` security schemes next to the bearer key, not as
parameters of each operation: they say who the key acts as, which holds for every request of
a caller, so Swagger UI takes them once in its Authorize dialog (with the key) and sends them
on every operation that reads them. They are optional alternatives to the bare key (each
`security` entry is one sufficient set): agent keys need neither, service keys add
X-Agent-Id, admin keys X-Tenant-Id (and X-Agent-Id to act as an agent).

Which operations read them is found from the routes, so a new route can't miss it: every
operation that depends on `get_caller` reads both; the key routes read X-Tenant-Id
(`get_named_tenant`).
"""

from collections.abc import Callable, Iterable, Iterator
from itertools import combinations
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from app.auth.deps import bearer, get_acting_agent, get_caller, get_named_tenant
from app.auth.schemas import AGENT_ID_PATTERN

BEARER = bearer.scheme_name
AGENT = "AgentId"
TENANT = "TenantId"

SCHEMES: dict[str, dict[str, Any]] = {
    AGENT: {
        "type": "apiKey",
        "in": "header",
        "name": "X-Agent-Id",
        "description": (
            "The agent a service or admin key acts as (an agent key may only name its own "
            "agent: another is 403 `agent_mismatch`). Operations that act as an agent (creating "
            "a session, agent memory, searching `scope=agent`) need it with a service key (400 "
            "`agent_required`). 1-200 characters: letters, digits and `_ . : @ -`, starting "
            f"with a letter or digit (`{AGENT_ID_PATTERN}`; else 400 `invalid_agent_id`)."
        ),
    },
    TENANT: {
        "type": "apiKey",
        "in": "header",
        "name": "X-Tenant-Id",
        "description": (
            "Admin keys: the id of the tenant to act in (400 `tenant_required` without it where "
            "a tenant is needed, 400 `invalid_tenant_id` if it is not a UUID, 404 for an unknown "
            "tenant). Other keys act in their own tenant and need not send it."
        ),
    },
}

# the dependency -> the schemes of the headers it reads
READERS: dict[Callable[..., Any], tuple[str, ...]] = {
    get_caller: (AGENT, TENANT),
    get_named_tenant: (TENANT,),
    get_acting_agent: (AGENT,),
}


def declare(doc: dict[str, Any], routes: Iterable[tuple[str, APIRoute]]) -> None:
    """Add the schemes, and the alternatives on each operation (path, route) that reads the
    headers: the bare key, then the key with each combination of the headers it reads."""
    doc.setdefault("components", {}).setdefault("securitySchemes", {}).update(SCHEMES)
    for path, route in routes:
        read = headers_read(route)
        if not route.include_in_schema or not read:
            continue
        security: list[dict[str, list[str]]] = [
            {BEARER: [], **{scheme: [] for scheme in combo}}
            for n in range(len(read) + 1)
            for combo in combinations(read, n)
        ]
        for method in route.methods or ():
            doc["paths"][path][method.lower()]["security"] = security


def headers_read(route: APIRoute) -> list[str]:
    """The schemes of the acting headers the route's dependencies read, in SCHEMES order."""
    calls = {d.call for d in _dependants(route.dependant) if d.call is not None}
    return [scheme for scheme in SCHEMES if any(scheme in READERS.get(call, ()) for call in calls)]


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _dependants(sub)

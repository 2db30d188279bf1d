"""Unknown query parameters are refused by the authentication every /v1 route runs
(`app.core.query_params`, called from `app.auth.deps._principal`): every route must depend
on it, or a route added without it would silently ignore a misspelled parameter."""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute

from app.api import ROUTERS
from app.auth import deps


def _calls(dependant: Any) -> set[Any]:
    out: set[Any] = set()
    for sub in dependant.dependencies:
        out.add(sub.call)
        out |= _calls(sub)
    return out


def test_every_v1_route_authenticates_where_the_query_is_checked() -> None:
    routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) > 50
    unchecked = [
        f"{sorted(r.methods or ())} {r.path}"
        for r in routes
        if not ({deps.get_principal, deps.get_caller} & _calls(r.dependant))
    ]
    assert unchecked == []


async def test_an_unknown_parameter_is_refused_after_the_key_is_checked(client, tenant):
    r = await client.get("/v1/sessions", params={"agentid": "a"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_query_parameter"
    # without a key the answer is 401: an anonymous caller learns nothing about the route
    anon = tenant.client_for("", {})
    assert (await anon.get("/v1/sessions", params={"agentid": "a"})).status_code == 401


def test_routes_that_are_not_fastapi_routes_are_left_alone() -> None:
    """The MCP endpoint is a plain Starlette route that authenticates through the same
    code: its query string is not the /v1 routes' business."""
    from starlette.requests import Request
    from starlette.routing import Route

    from app.core.query_params import reject_unknown_query

    async def endpoint(scope, receive, send):  # never called
        raise AssertionError

    for route in (Route("/mcp", endpoint), None):
        scope: dict[str, Any] = {
            "type": "http",
            "query_string": b"trace=1",
            "route": route,
            "headers": [],
        }
        reject_unknown_query(Request(scope))  # no 422

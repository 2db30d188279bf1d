"""Unknown query parameters are refused: a misspelled `as_of` must not be
ignored, just as an unknown body field is not (bodies forbid extra fields).

Checked by the authentication every /v1 route runs (`app.auth.deps`; a test walks the
routes), keyed on what the matched route itself declares: the query parameters of its
endpoint and of its dependencies. Unknown ones are 422 `unknown_query_parameter`, naming
each in `details`. Not a dependency of its own: each dependency node costs FastAPI about
10 us on every request (a bare FastAPI app: 43 us with no dependency, 53 with one), this
check nothing without a query string."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import BaseModel

from app.core.errors import Unprocessable

_DECLARED: dict[int, frozenset[str]] = {}


def _names(dependant: Any, seen: set[int]) -> set[str]:
    if dependant is None or id(dependant) in seen:
        return set()
    seen.add(id(dependant))
    out: set[str] = set()
    for p in dependant.query_params:
        kind = getattr(p.field_info, "annotation", None)
        if isinstance(kind, type) and issubclass(kind, BaseModel):  # a query model
            out |= {f.alias or n for n, f in kind.model_fields.items()}
        else:
            out.add(p.alias)
    for sub in dependant.dependencies:
        out |= _names(sub, seen)
    return out


def declared(route: Any) -> frozenset[str]:
    """The query parameter names (aliases) a route reads; computed once per route."""
    key = id(route)
    names = _DECLARED.get(key)
    if names is None:
        names = frozenset(_names(getattr(route, "dependant", None), set()))
        _DECLARED[key] = names
    return names


def reject_unknown_query(request: Request) -> None:
    """422 when the request names a query parameter its route does not declare."""
    if not request.scope.get("query_string"):
        return
    route = request.scope.get("route")
    if getattr(route, "dependant", None) is None:
        return  # not a FastAPI route (the MCP endpoint authenticates the same way)
    known = declared(route)
    unknown = [k for k in dict.fromkeys(request.query_params.keys()) if k not in known]
    if not unknown:
        return
    listed = ", ".join(unknown)
    accepted = ", ".join(sorted(known)) or "none"
    raise Unprocessable(
        f"Unknown query parameter{'s' if len(unknown) > 1 else ''}: {listed} "
        f"(this operation accepts: {accepted}).",
        code="unknown_query_parameter",
        details=[
            {
                "loc": ["query", k],
                "msg": "unknown query parameter",
                "type": "unknown_query_parameter",
            }
            for k in unknown
        ],
    )

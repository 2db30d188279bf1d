"""The hot routes' lanes (`app.core.edge`): a lane answers exactly what the router answers.

Two apps on the same database, one with the lanes and one without, get the same requests;
the answers (status, media type, body but for the ids a build draws afresh) must be equal,
and the lane must have taken the requests it is for and declined the ones it is not.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app import api
from app.context.router import build_context
from app.core.edge import Edge, Lane
from app.main import create_app
from app.messages.router import append_messages
from tests.support.api import create_session

# what a build draws afresh: its id and its time
FRESH = frozenset({"context_id", "created_at", "id", "session_id"})


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<fresh>" if k in FRESH else _strip(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


class Seen:
    """What the lanes did with each request: answered, declined, or raised (an error the
    app's handlers rendered)."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def wrap(self, lane: Lane) -> Lane:
        async def handle(request: Any, id_: str, body: bytes) -> Any:
            try:
                response = await lane.handle(request, id_, body)
            except Exception:
                self.log.append("raised")
                raise
            self.log.append("declined" if response is None else "answered")
            return response

        return Lane(lane.method, lane.path, handle)

    def last(self) -> str | None:
        return self.log[-1] if self.log else None


def _with_lanes(app: Any, lanes: tuple[Lane, ...]) -> Any:
    for middleware in app.user_middleware:
        if middleware.cls is Edge:
            middleware.kwargs["lanes"] = lanes
            return app
    raise AssertionError("the app has no Edge middleware")


@pytest.fixture
async def pair(settings: Any) -> AsyncIterator[tuple[Any, Any, Seen]]:
    seen = Seen()
    laned = _with_lanes(create_app(settings), tuple(seen.wrap(lane) for lane in api.LANES))
    routed = _with_lanes(create_app(settings), ())
    async with laned.router.lifespan_context(laned), routed.router.lifespan_context(routed):
        yield laned, routed, seen


async def _both(
    pair: tuple[Any, Any, Seen], method: str, url: str | tuple[str, str], **kwargs: Any
) -> tuple[httpx.Response, httpx.Response, str | None]:
    """The same request to the app with lanes and to the one without (`url`: one for each,
    when they must not touch the same rows)."""
    laned, routed, seen = pair
    urls = (url, url) if isinstance(url, str) else url
    seen.log.clear()
    answers = []
    for app, target in zip((laned, routed), urls, strict=True):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            answers.append(await c.request(method, target, **kwargs))
    return answers[0], answers[1], seen.last()


def _same(a: httpx.Response, b: httpx.Response) -> None:
    assert a.status_code == b.status_code, (a.text, b.text)
    assert a.headers.get("content-type") == b.headers.get("content-type")
    for name in ("www-authenticate", "retry-after", "allow"):
        assert a.headers.get(name) == b.headers.get(name)
    assert "x-request-id" in a.headers
    left, right = _strip(a.json()), _strip(b.json())
    assert left == right, _diff(left, right)


def _diff(a: Any, b: Any, at: str = "") -> list[str]:
    """Where two JSON values differ (paths), for the failure message."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in a.keys() | b.keys() for d in _diff(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{at}[{i}]")
        ]
    return [] if a == b else [f"{at}: {a!r} != {b!r}"]


async def test_the_context_lane_answers_as_the_router(pair, client, tenant) -> None:
    session = await create_session(client, "agent-1")
    sid = session["id"]
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [
            {"role": "user", "content": "I live in Lisbon"},
            {"role": "assistant", "content": "Noted: Lisbon."},
        ]},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    auth = {"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "agent-1"}
    as_json = {**auth, "Content-Type": "application/json"}
    url = f"/v1/sessions/{sid}/context"
    other = await tenant.create_key("agent", "agent-2")

    cases: list[tuple[str, str, dict[str, Any], str]] = [
        # (what, url, request kwargs, what the lane does)
        ("no body", url, {"headers": auth}, "answered"),
        ("empty object", url, {"headers": as_json, "content": b"{}"}, "answered"),
        ("openai", url, {"headers": auth, "json": {"format": "openai"}}, "answered"),
        ("raw", url, {"headers": auth, "json": {"format": "raw", "manifest": True}}, "answered"),
        (
            "charset",
            url,
            {
                "headers": {**auth, "Content-Type": "application/json; charset=utf-8"},
                "content": b'{"format": "openai"}',
            },
            "answered",
        ),  # fmt: skip
        (
            "upper-case id",
            url.upper().replace("/V1/SESSIONS/", "/v1/sessions/").replace("/CONTEXT", "/context"),
            {"headers": auth},
            "answered",
        ),  # fmt: skip
        ("unknown session", f"/v1/sessions/{uuid.uuid4()}/context", {"headers": auth}, "raised"),
        (
            "another agent's session",
            url,
            {"headers": {"Authorization": f"Bearer {other['secret']}"}},
            "raised",
        ),  # fmt: skip
        ("no key", url, {}, "raised"),
        ("unknown key", url, {"headers": {"Authorization": "Bearer lm_nope"}}, "raised"),
        ("bad agent header", url, {"headers": {**auth, "X-Agent-Id": "no spaces"}}, "raised"),
        ("bad format", url, {"headers": auth, "json": {"format": "xml"}}, "declined"),
        ("unknown field", url, {"headers": auth, "json": {"formats": "raw"}}, "declined"),
        ("record as a string", url, {"headers": auth, "json": {"record": "yes"}}, "declined"),
        ("broken JSON", url, {"headers": as_json, "content": b'{"format":'}, "declined"),
        ("a list", url, {"headers": as_json, "content": b"[]"}, "declined"),
        ("null", url, {"headers": as_json, "content": b"null"}, "declined"),
        ("NaN", url, {"headers": as_json, "content": b'{"x": NaN}'}, "declined"),
        (
            "text body",
            url,
            {"headers": {**auth, "Content-Type": "text/plain"}, "content": b"{}"},
            "declined",
        ),  # fmt: skip
        ("no media type", url, {"headers": auth, "content": b"{}"}, "declined"),
        ("query string", url + "?format=raw", {"headers": auth}, "declined"),
    ]
    for what, target, kwargs, lane_did in cases:
        via_lane, via_router, did = await _both(pair, "POST", target, **kwargs)
        _same(via_lane, via_router)
        assert did == lane_did, (what, did, via_lane.text)

    # not the lane's: other spellings of the id, other methods, other paths
    for what, method, target in [
        ("id without hyphens", "POST", f"/v1/sessions/{uuid.UUID(sid).hex}/context"),
        ("id in braces", "POST", f"/v1/sessions/{{{sid}}}/context"),
        ("GET", "GET", url),
        ("trailing slash", "POST", url + "/"),
        ("not an id", "POST", "/v1/sessions/123/context"),
    ]:
        via_lane, via_router, did = await _both(pair, method, target, headers=auth)
        assert via_lane.status_code == via_router.status_code, what
        assert did is None, what


async def test_the_append_lane_answers_and_stores_as_the_router(pair, client, tenant) -> None:
    # one session for each app, the same requests to both: the same answers, the same rows
    sids = [(await create_session(client, "agent-1"))["id"] for _ in range(2)]
    urls = tuple(f"/v1/sessions/{sid}/messages" for sid in sids)
    auth = {"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "agent-1"}
    one = {"messages": [{"role": "user", "content": "I moved to Porto"}]}
    turn = {"messages": [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "Porto"}},
        ]},
        {"role": "tool", "tool_use_id": "tu_1", "content": "a city in Portugal"},
    ]}  # fmt: skip
    long_key = "k" * 256
    call = {"id": "tu_2", "name": "n", "input": {"n": 2**70}}
    big = {"messages": [{"role": "assistant", "content": "", "tool_calls": [call]}]}

    cases: list[tuple[str, Any, dict[str, Any], str]] = [
        ("one message", urls, {"headers": auth, "json": one}, "answered"),
        ("a tool turn", urls, {"headers": auth, "json": turn}, "answered"),
        (
            "idempotent",
            urls,
            {"headers": {**auth, "Idempotency-Key": "k-1"}, "json": one},
            "answered",
        ),  # fmt: skip
        (
            "its replay",
            urls,
            {"headers": {**auth, "Idempotency-Key": "k-1"}, "json": one},
            "answered",
        ),  # fmt: skip
        (
            "the key again, another body",
            urls,
            {"headers": {**auth, "Idempotency-Key": "k-1"}, "json": turn},
            "raised",
        ),  # fmt: skip
        (
            "unknown session",
            f"/v1/sessions/{uuid.uuid4()}/messages",
            {"headers": auth, "json": one},
            "raised",
        ),  # fmt: skip
        ("no key", urls, {"json": one}, "raised"),
        (
            "a key over 255",
            urls,
            {"headers": {**auth, "Idempotency-Key": long_key}, "json": one},
            "declined",
        ),  # fmt: skip
        ("no body", urls, {"headers": auth}, "declined"),
        ("an integer beyond 64 bits", urls, {"headers": auth, "json": big}, "declined"),
        ("no messages", urls, {"headers": auth, "json": {"messages": []}}, "declined"),
        (
            "bad role",
            urls,
            {"headers": auth, "json": {"messages": [{"role": "x", "content": ""}]}},
            "declined",
        ),  # fmt: skip
        (
            "text body",
            urls,
            {"headers": {**auth, "Content-Type": "text/plain"}, "content": b"{}"},
            "declined",
        ),  # fmt: skip
        (
            "query string",
            tuple(u + "?x=1" for u in urls),
            {"headers": auth, "json": one},
            "declined",
        ),  # fmt: skip
    ]
    for what, target, kwargs, lane_did in cases:
        via_lane, via_router, did = await _both(pair, "POST", target, **kwargs)
        _same(via_lane, via_router)
        assert did == lane_did, (what, did, via_lane.text)
        if what == "its replay":
            assert via_lane.status_code == 200 and via_lane.json()["replayed"] is True

    # what each stored: the same history
    stored = []
    for sid in sids:
        r = await client.get(f"/v1/sessions/{sid}/messages", params={"limit": 200})
        assert r.status_code == 200, r.text
        stored.append(_strip(r.json()))
    assert stored[0] == stored[1]
    # one, the tool turn's two, the idempotent one, the long integer's (kept exactly)
    assert len(stored[0]["items"]) == 5
    assert stored[0]["items"][-1]["tool_calls"][0]["input"]["n"] == 2**70


def test_each_lane_knows_every_parameter_of_its_route() -> None:
    # a lane passes its route's endpoint every parameter itself: one added to the route
    # (a header, a query parameter) must be added to the lane, or the lane must decline
    # requests that carry it; this fails until one of the two is done
    assert list(inspect.signature(build_context).parameters) == [
        "session_id", "caller", "request", "body",
    ]  # fmt: skip
    assert list(inspect.signature(append_messages).parameters) == [
        "session_id", "body", "caller", "request", "response", "background", "idempotency_key",
    ]  # fmt: skip
    assert {lane.path for lane in api.LANES} == {
        "/v1/sessions/{session_id}/context",
        "/v1/sessions/{session_id}/messages",
    }

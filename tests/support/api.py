"""Helpers for API tests: a client on the in-process app, a new session."""

from typing import Any

import httpx


def make_client(app: Any, key: str, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """A client that talks to `app` through httpx's ASGI transport with `key`."""
    all_headers = {"Authorization": f"Bearer {key}", **(headers or {})}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers=all_headers,
        timeout=30,
    )


async def create_session(
    client: httpx.AsyncClient,
    agent_id: str | None = None,
    *,
    rom: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    **config: Any,
) -> dict[str, Any]:
    """POST /v1/sessions (201 asserted) and return the created session. Keyword arguments
    other than `rom` and `metadata` are the session's config; fields left out are not
    sent (an empty config is not sent either, which the server treats alike)."""
    body: dict[str, Any] = {}
    if agent_id:
        body["agent_id"] = agent_id
    if config:
        body["config"] = config
    if metadata is not None:
        body["metadata"] = metadata
    if rom is not None:
        body["rom"] = rom
    resp = await client.post("/v1/sessions", json=body)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def new_session(
    client: httpx.AsyncClient,
    agent_id: str | None = None,
    *,
    rom: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    **config: Any,
) -> str:
    """Create a session (see `create_session`) and return its id."""
    session = await create_session(client, agent_id, rom=rom, metadata=metadata, **config)
    return str(session["id"])

# Generated from loom_client/_async/base.py by scripts/generate_sync.py: do not edit.
"""The client's connection, headers and request plumbing."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from loom_client import _wire
from loom_client._wire import RequestOptions

C = TypeVar("C", bound="BaseClient")
M = TypeVar("M", bound=BaseModel)


class BaseClient:
    """Holds the HTTP connection pool, the key and the default agent and tenant."""

    def __init__(self, base_url: str | httpx.URL | None = None, api_key: str | None = None,
                 *, agent_id: str | None = None, tenant_id: str | None = None,
                 timeout: float | httpx.Timeout | None = _wire.DEFAULT_TIMEOUT,
                 headers: Mapping[str, str] | None = None,
                 http_client: httpx.Client | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        """`base_url` defaults to `$LOOM_BASE_URL` or http://127.0.0.1:8420, `api_key` to
        `$LOOM_API_KEY`. `agent_id` / `tenant_id` are sent as `X-Agent-Id` / `X-Tenant-Id`
        on every call (override per call with `options=`, or copy with `with_agent`).
        `http_client` (left open on close) or `transport` replace the default connection."""
        if http_client is not None and transport is not None:
            raise ValueError("give http_client or transport, not both")
        self.base_url = _wire.resolve_base_url(base_url)
        self.agent_id = agent_id
        self.tenant_id = tenant_id
        self.timeout = timeout
        self._headers = _wire.default_headers(_wire.resolve_api_key(api_key), headers)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(transport=transport, timeout=timeout)

    def with_agent(self: C, agent_id: str | None) -> C:
        """A client acting as `agent_id` (sharing this one's connections; closing the copy
        leaves them open)."""
        clone = copy.copy(self)
        clone.agent_id = agent_id
        clone._owns_http = False
        return clone

    def with_tenant(self: C, tenant_id: str | None) -> C:
        """A client acting in `tenant_id` (admin keys), sharing this one's connections."""
        clone = copy.copy(self)
        clone.tenant_id = tenant_id
        clone._owns_http = False
        return clone

    def close(self) -> None:
        """Close the connections (unless they came from `http_client` or this is a copy)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _build(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
               json: Any = None, content: bytes | None = None,
               headers: Mapping[str, str] | None = None,
               options: RequestOptions | None = None, stream: bool = False) -> httpx.Request:
        """A request with the client's and the call's headers; a `stream` has no read
        timeout by default (a watch may be quiet between heartbeats)."""
        default = _wire.stream_timeout(self.timeout) if stream else self.timeout
        return self._http.build_request(
            method, self.base_url + path, params=params, json=json, content=content,
            headers=_wire.call_headers(self._headers, self.agent_id, self.tenant_id,
                                       options, headers),
            timeout=_wire.timeout_of(options, default))

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send a request; raise the typed error of an error answer, `LoomConnectionError`
        when there is no answer."""
        request = self._build(method, path, **kwargs)
        with _wire.transport_errors(request):
            response = self._http.send(request)
        _wire.check(response)
        return response

    def _request(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        """Send a request and parse its JSON answer as `model`."""
        return _wire.parse(model, self._send(method, path, **kwargs))

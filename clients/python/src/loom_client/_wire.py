"""Request building and response handling shared by the sync and async clients (no I/O)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any, TypedDict, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from loom_client.errors import connection_error, error_from_response
from loom_client.models.shared_memory import SharedMemoryBlob, SharedMemoryEntry

DEFAULT_BASE_URL = "http://127.0.0.1:8420"
DEFAULT_TIMEOUT = 30.0
USER_AGENT = "loom-memory-client/0.1.0"

M = TypeVar("M", bound=BaseModel)


class RequestOptions(TypedDict, total=False):
    """Per-call overrides (every method takes them as `options=`)."""

    agent_id: str | None
    """`X-Agent-Id` for this call (None: send none)."""
    tenant_id: str | None
    """`X-Tenant-Id` for this call (admin keys; None: send none)."""
    headers: Mapping[str, str]
    """Extra headers."""
    timeout: float | httpx.Timeout | None
    """Timeout for this call (None: no timeout)."""


def resolve_base_url(base_url: str | httpx.URL | None) -> str:
    url = str(base_url or os.environ.get("LOOM_BASE_URL") or DEFAULT_BASE_URL)
    return url.rstrip("/")


def resolve_api_key(api_key: str | None) -> str | None:
    return api_key if api_key is not None else os.environ.get("LOOM_API_KEY")


def default_headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers


def call_headers(base: Mapping[str, str], agent_id: str | None, tenant_id: str | None,
                 options: RequestOptions | None,
                 extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers of one request: the client's, its agent and tenant, the call's."""
    options = options or {}
    headers = dict(base)
    agent = options["agent_id"] if "agent_id" in options else agent_id
    tenant = options["tenant_id"] if "tenant_id" in options else tenant_id
    if agent:
        headers["X-Agent-Id"] = agent
    if tenant:
        headers["X-Tenant-Id"] = tenant
    headers.update(options.get("headers") or {})
    headers.update(extra or {})
    return headers


def segment(value: object) -> str:
    """One path segment, percent-encoded (ids, namespaces, names)."""
    return quote(str(value), safe="")


def key_path(key: str) -> str:
    """A shared-memory key: `/` separates its segments and stays as it is."""
    return quote(key, safe="/")


def dump(value: Any) -> Any:
    """Request data as JSON-ready values: models with only the fields that were set."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, Mapping):
        return {str(k): dump(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [dump(v) for v in value]
    return to_jsonable_python(value)


def body(**fields: Any) -> dict[str, Any]:
    """A JSON body of the fields that are not None."""
    return {name: dump(value) for name, value in fields.items() if value is not None}


def query(**params: Any) -> dict[str, str | int | float]:
    """Query parameters that are not None (booleans as `true`/`false`)."""
    out: dict[str, str | int | float] = {}
    for name, value in params.items():
        if value is None:
            continue
        out[name] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


def etag(version_or_etag: int | str) -> str:
    """An If-Match / If-None-Match value from a version (7 -> `"7"`) or an ETag as is."""
    if isinstance(version_or_etag, bool):
        raise TypeError("a version is an int or an ETag string")
    if isinstance(version_or_etag, int):
        return f'"{version_or_etag}"'
    return version_or_etag


@contextlib.contextmanager
def transport_errors(request: httpx.Request) -> Iterator[None]:
    """httpx's failures to get an answer (the server down, a broken connection, a timeout)
    raised as the client's `LoomConnectionError`, a `LoomError`."""
    try:
        yield
    except httpx.TransportError as exc:
        url = str(request.url.copy_with(query=None))
        raise connection_error(exc, url) from exc


def check(response: httpx.Response) -> None:
    """Raise the typed error of an error response (its body must have been read)."""
    if response.status_code >= 400:
        raise error_from_response(response)


def parse(model: type[M], response: httpx.Response) -> M:
    return model.model_validate_json(response.content)


def stream_timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    """`timeout` without its read timeout."""
    if isinstance(timeout, httpx.Timeout):
        return httpx.Timeout(connect=timeout.connect, read=None, write=timeout.write,
                             pool=timeout.pool)
    return httpx.Timeout(timeout, read=None)


def entry_or_blob(response: httpx.Response) -> SharedMemoryEntry | SharedMemoryBlob:
    """A shared-memory GET answer: a JSON entry (with `value`) or a raw value's bytes."""
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type == "application/json":
        return parse(SharedMemoryEntry, response)
    return blob(response)


def blob(response: httpx.Response) -> SharedMemoryBlob:
    """Raw bytes with the entry headers (`ETag`, `X-Loom-Version`, `X-Loom-Checksum`...)."""
    h = response.headers
    version = h.get("x-loom-version")
    compressed = h.get("x-loom-compressed")
    return SharedMemoryBlob(
        content=response.content,
        content_type=h.get("content-type", "application/octet-stream"),
        etag=h.get("etag"), version=int(version) if version and version.isdigit() else None,
        checksum=h.get("x-loom-checksum"), ref_id=h.get("x-loom-ref-id"),
        compressed=None if compressed is None else compressed == "true",
        location=h.get("x-loom-storage-location"))


def preconditions(if_match: int | str | None,
                  if_none_match: int | str | None = None) -> dict[str, str]:
    headers = {}
    if if_match is not None:
        headers["If-Match"] = etag(if_match)
    if if_none_match is not None:
        headers["If-None-Match"] = etag(if_none_match)
    return headers


def timeout_of(options: RequestOptions | None,
               default: float | httpx.Timeout | None) -> float | httpx.Timeout | None:
    if options and "timeout" in options:
        return options["timeout"]
    return default

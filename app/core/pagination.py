"""Opaque, signed cursors for cursor-paginated lists.

A cursor is `<payload>.<tag>`: the payload is compact JSON in unpadded base64url, the tag
the first 16 bytes of HMAC-SHA256(key, payload), base64url. A cursor that is not exactly
this shape, or whose tag does not match, is 400 `invalid_cursor` before anything decodes
it; after a good tag the payload is still checked field by field (exact types, integers in
the 64-bit range), so even a leaked key cannot reach a 500.

The key (decision): `LOOM_CURSOR_SECRET` when set; otherwise derived from `LOOM_ADMIN_KEY`
and `DATABASE_URL`, which every process of one deployment shares, so cursors survive
restarts and work across replicas without a new setting to manage; with neither (a bare
test app), a random key per process. Cursors are not secrets (they hold positions of rows
the caller may already read); the tag only makes them tamper-proof.
"""

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
import secrets
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

from fastapi import Query

from app.core.config import Settings
from app.core.errors import BadRequest

T = TypeVar("T")

CURSOR_MAX_LENGTH = 1024
CURSOR_PATTERN = r"^[A-Za-z0-9_-]{1,1000}\.[A-Za-z0-9_-]{22}$"
_CURSOR_RE = re.compile(CURSOR_PATTERN)
_TAG_BYTES = 16
INT64_MAX = 2**63 - 1
# An empty cursor is the first page, like no cursor (decode_cursor), so the schema admits it.
CURSOR_SCHEMA: dict[str, Any] = {
    "pattern": r"^(?:[A-Za-z0-9_-]{1,1000}\.[A-Za-z0-9_-]{22})?$",
    "maxLength": CURSOR_MAX_LENGTH,
}
CURSOR_DESCRIPTION = (
    "`next_cursor` of the previous page (opaque; empty: the first page; anything else is 400)."
)

_key: bytes = secrets.token_bytes(32)


def configure(settings: Settings) -> None:
    """Set the signing key from the settings (see the module docstring)."""
    global _key
    secret = settings.cursor_secret.get_secret_value() if settings.cursor_secret else ""
    if secret:
        _key = hashlib.sha256(b"loom-cursor-secret\0" + secret.encode()).digest()
        return
    admin = settings.admin_key.get_secret_value() if settings.admin_key else ""
    dsn = settings.database_url or ""
    if admin or dsn:
        _key = hashlib.sha256(b"loom-cursor\0" + admin.encode() + b"\0" + dsn.encode()).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _tag(payload: str) -> str:
    return _b64(hmac.new(_key, payload.encode(), hashlib.sha256).digest()[:_TAG_BYTES])


def encode_cursor(payload: dict[str, Any]) -> str:
    body = _b64(json.dumps(payload, separators=(",", ":"), default=str).encode())
    return f"{body}.{_tag(body)}"


def invalid_cursor(message: str = "The cursor is not valid.") -> BadRequest:
    """The one error for a cursor that can't be used (400 `invalid_cursor`)."""
    return BadRequest(message, code="invalid_cursor")


_invalid = invalid_cursor


def fetch_limit(limit: int) -> int:
    """Rows to fetch for a page of `limit`: one more tells whether another page follows."""
    return limit + 1


def page(
    rows: Sequence[T], limit: int, cursor_after: Callable[[T], dict[str, Any]]
) -> tuple[list[T], str | None]:
    """The first `limit` of `rows` (fetched with `fetch_limit(limit)`) and the cursor of
    the next page (`cursor_after(last row)`), or None when this is the last page."""
    items = list(rows[:limit])
    nxt = encode_cursor(cursor_after(items[-1])) if len(rows) > limit and items else None
    return items, nxt


def _check(value: Any, kind: type) -> Any:
    # Exact types: a bool is not an int, an int is not a str; `object` = any finite scalar.
    if kind is object:
        if value is not None and type(value) not in (str, int, float):
            raise _invalid()
        if type(value) is float and not math.isfinite(value):
            raise _invalid()
        kind = type(value)
    elif type(value) is not kind:
        raise _invalid()
    if kind is int and not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise _invalid()
    if kind is str and len(value) > CURSOR_MAX_LENGTH:
        raise _invalid()
    return value


def decode_cursor(cursor: str | None, fields: dict[str, type]) -> dict[str, Any] | None:
    """The payload of a cursor from `encode_cursor`, or None for no cursor.

    `fields` names every key the payload must hold and its exact type (int, str);
    anything else, or a cursor that is not ours, is 400 `invalid_cursor`, never a 500.
    """
    if cursor is None or cursor == "":
        return None
    if len(cursor) > CURSOR_MAX_LENGTH or not _CURSOR_RE.fullmatch(cursor):
        raise _invalid()
    body, tag = cursor.split(".")
    if not hmac.compare_digest(tag, _tag(body)):
        raise _invalid()
    try:
        data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, binascii.Error, RecursionError) as exc:
        raise _invalid() from exc
    if not isinstance(data, dict) or set(data) != set(fields):
        raise _invalid()
    return {name: _check(data[name], kind) for name, kind in fields.items()}


# The `cursor` query parameter of every list route.
CursorQuery = Annotated[
    str | None, Query(description=CURSOR_DESCRIPTION, json_schema_extra=CURSOR_SCHEMA)
]

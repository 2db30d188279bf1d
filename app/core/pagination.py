"""Opaque cursors for cursor-paginated lists."""

import base64
import json
from typing import Any

from app.core.errors import BadRequest


def encode_cursor(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> dict[str, Any] | None:
    """Decode a cursor from `encode_cursor`; a malformed one is a 400, never a 500."""
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeError) as exc:
        raise BadRequest("The cursor is not valid.", code="invalid_cursor") from exc
    if not isinstance(data, dict):
        raise BadRequest("The cursor is not valid.", code="invalid_cursor")
    return data

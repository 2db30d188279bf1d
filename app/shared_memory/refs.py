"""Data references (pure): the ~50-token stand-in for a large payload.

A reference names one shared-memory entry by a `ref_...` id. Messages carry it instead of
a large tool result; the context shows `render(ref)`; `GET /v1/refs/{id}` returns the data.
`location` is where the durable copy lives (`postgres`) or, in reads, the tier that
served it (`memory`).
"""

import secrets
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

REF_PREFIX = "ref_"
Location = Literal["memory", "postgres"]


def new_ref_id() -> str:
    """A fresh reference id: `ref_` + 16 hex characters (64 random bits).

    Unguessability is a second fence only: every lookup is also filtered by tenant.
    """
    return REF_PREFIX + secrets.token_hex(8)


def is_ref_id(value: str) -> bool:
    body = value[len(REF_PREFIX) :]
    return (
        value.startswith(REF_PREFIX)
        and len(body) == 16
        and all(c in "0123456789abcdef" for c in body)
    )


class DataReference(BaseModel):
    """Where a payload lives and how to check it; serialised into messages as-is."""

    id: str = Field(examples=["ref_9f2c4e1a0b7d3c5e"])
    size_bytes: int = Field(ge=0, description="original size, before compression")
    checksum: str = Field(description="SHA-256 hex of the original bytes")
    content_type: str
    location: Location = "postgres"
    compressed: bool
    stored_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)


def human_size(n: int) -> str:
    """1536 -> '1.5 KB'; binary units, one decimal."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def render(ref: DataReference) -> str:
    """The text a context shows for `ref`: about 50 cl100k tokens, whatever the payload size.

    Random hex is token-hungry, so only the id is shown in full; the checksum is cut to 8
    characters (enough to tell payloads apart in a conversation).
    """
    gz = " gzip," if ref.compressed else ""
    return (
        f"[data reference {ref.id}: {human_size(ref.size_bytes)} {ref.content_type},{gz} "
        f"sha256 {ref.checksum[:8]}, stored {ref.stored_at:%Y-%m-%d}. "
        "Not inlined; fetch: GET /v1/refs/<id>]"
    )

"""TTL policy (pure): when an entry expires and whether it may be served or removed.

Decision: a data reference held by a message (refcount > 0) keeps its entry alive past its
TTL, both for reads and for the cleanup job; "expired" means past TTL *and* unreferenced.
"""

from datetime import datetime, timedelta
from typing import Annotated

from pydantic import Field

MIN_TTL_SECONDS = 1
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600
# The TTL field of every input (REST body and query, the shared_memory_write tool).
TtlSeconds = Annotated[int, Field(ge=MIN_TTL_SECONDS, le=MAX_TTL_SECONDS)]


def expires_at(now: datetime, ttl_seconds: int | None) -> datetime | None:
    """Absolute expiry for a TTL (None = never). Validation of the range is the schema's job."""
    if ttl_seconds is None:
        return None
    return now + timedelta(seconds=int(ttl_seconds))


def is_expired(expires: datetime | None, now: datetime, refcount: int = 0) -> bool:
    """True when the entry must not be served and may be deleted by cleanup."""
    if expires is None or refcount > 0:
        return False
    return now >= expires


def remaining_seconds(expires: datetime | None, now: datetime) -> int | None:
    """Whole seconds left (never negative), None when the entry has no TTL."""
    if expires is None:
        return None
    return max(0, int((expires - now).total_seconds()))

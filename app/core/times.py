"""`as_of` values, with no I/O: an RFC 3339 date-time with a
timezone, or a date alone, which means its start: 00:00 UTC of that day (`2026-02-15` ->
`2026-02-15T00:00:00Z`). A date-time without a timezone stays an error (which zone would
it be?)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from app.core.strict import RFC3339_PATTERN, JsonAwareDatetime

DATE_PATTERN = r"^(?!0001-|9999-)[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DATE = re.compile(DATE_PATTERN)
AS_OF_DOC = "A date alone means its start, 00:00 UTC (`2026-02-15` = `2026-02-15T00:00:00Z`)."


def start_of(day: date) -> datetime:
    return datetime.combine(day, time(0, 0), tzinfo=UTC)


def _as_of(value: Any) -> Any:
    if isinstance(value, date) and not isinstance(value, datetime):
        return start_of(value)
    if isinstance(value, str) and _DATE.match(value):
        try:
            return start_of(date.fromisoformat(value))
        except ValueError:
            raise PydanticCustomError(
                "date_parsing", "Input should be a real date, such as 2026-02-15"
            ) from None
    return value  # JsonAwareDatetime's own checks follow


AsOf = Annotated[
    JsonAwareDatetime,
    BeforeValidator(_as_of),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date-time", "pattern": RFC3339_PATTERN},
                {"type": "string", "format": "date", "pattern": DATE_PATTERN},
            ]
        }
    ),
]

"""Number and date-time types for JSON request bodies, as JSON Schema reads them.

Pydantic's lax mode turns `true` into 1 and `"5"` into 5, which the OpenAPI document
(`type: integer` / `type: number`) forbids; its strict mode refuses `2.0`, which JSON Schema
counts as the integer 2. These accept exactly the JSON numbers the schema admits. Booleans
use pydantic's `StrictBool`. Query parameters are strings on the wire and stay lax.

`JsonAwareDatetime` likewise accepts exactly the strings its schema pattern admits: an RFC
3339 date-time with a timezone. Pydantic's own datetime also takes numbers and numeric
strings (Unix time) and, strict or not, naive times, none of which the schema states.
"""

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError


def _integer(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value  # a whole float (2.0) becomes 2; 2.5 is refused by int validation


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("float_type", "Input should be a valid number")
    return value


JsonInt = Annotated[int, BeforeValidator(_integer)]
JsonFloat = Annotated[float, BeforeValidator(_number)]

# For bounded optional fields put the bounds inside, before the check, or the OpenAPI document
# shows them as unknown keywords (`ge`) instead of `minimum`/`maximum`:
#     Annotated[int, Field(ge=1), JSON_INT] | None
JSON_INT = BeforeValidator(_integer)

# RFC 3339 as datetime.fromisoformat reads it: upper-case T and Z, seconds required, no leap
# second, years 2-9998 (a timezone shift of year 1 or 9999 leaves datetime's range).
# Fractions past the microsecond are cut off (PostgreSQL keeps microseconds).
RFC3339_PATTERN = (
    r"^(?!0001-|9999-)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:(?!60)[0-9]{2}"
    r"(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})$"
)
_RFC3339 = re.compile(RFC3339_PATTERN)
# The same without the timezone, to say what a naive time lacks rather than "invalid".
_NAIVE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?$")


def _aware_datetime(value: Any) -> Any:
    if isinstance(value, datetime):  # built in Python, not read from JSON
        if value.tzinfo is None:
            raise PydanticCustomError("timezone_aware", "Input should have a timezone")
        return value.astimezone(UTC)
    if not isinstance(value, str):
        raise PydanticCustomError("datetime_type", "Input should be a date-time string")
    if _NAIVE.match(value):
        raise PydanticCustomError(
            "timezone_aware",
            "Input should have a timezone: end it with Z (UTC) or an offset such as +02:00",
        )
    try:
        parsed = datetime.fromisoformat(value) if _RFC3339.match(value) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise PydanticCustomError(
            "datetime_parsing",
            "Input should be an RFC 3339 date-time with a timezone, such as 2024-05-01T12:00:00Z",
        )
    return parsed.astimezone(UTC)


# A timezone-aware date-time from JSON, in UTC (the offset it was given in is not kept).
JsonAwareDatetime = Annotated[
    datetime,
    BeforeValidator(_aware_datetime),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": RFC3339_PATTERN}),
]

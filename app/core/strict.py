"""Number types for JSON request bodies: JSON numbers only, as JSON Schema reads them.

Pydantic's lax mode turns `true` into 1 and `"5"` into 5, which the OpenAPI document
(`type: integer` / `type: number`) forbids; its strict mode refuses `2.0`, which JSON Schema
counts as the integer 2. These accept exactly the JSON numbers the schema admits. Booleans
use pydantic's `StrictBool`. Query parameters are strings on the wire and stay lax.
"""

from typing import Annotated, Any

from pydantic import BeforeValidator
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

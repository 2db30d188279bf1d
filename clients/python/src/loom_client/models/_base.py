"""Base classes of the API models.

Responses allow unknown fields (a newer server may add some; they stay readable as
attributes and in `model_dump()`); requests forbid them, so a misspelt field fails here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ResponseModel(BaseModel):
    """A model the server sends."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class RequestModel(BaseModel):
    """A model the client sends (serialised with only the fields that were set)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Page(ResponseModel):
    """One page of a cursor-paginated list; `next_cursor` is None on the last page."""

    next_cursor: str | None = None

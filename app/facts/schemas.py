"""API schemas of fact edits (issue 27). The other fact schemas live with the knowledge
items they extend (`app.knowledge.schemas`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from app.core.strict import JsonAwareDatetime, JsonFloat
from app.facts.prompts import KEY_PATTERN


class MemoryItemUpdate(BaseModel):
    """A correction: only the fields given change (`invalid_at: null` makes an invalid item
    valid again). The change is a version `edit` with `reason`, the caller's key and
    agent."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    # not nullable; a field left out keeps its value (only `model_fields_set` applies, so
    # these defaults are never written)
    text: str = Field(default="", min_length=1, max_length=1_000_000)
    importance: JsonFloat = Field(default=0.0, ge=0, le=1)
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=64
    )
    key: str | None = Field(
        default=None,
        pattern=KEY_PATTERN,
        max_length=200,
        description=("Facts: what it is about (`user.home_city`)."),
    )
    valid_from: JsonAwareDatetime | SkipJsonSchema[None] = Field(
        default=None, description=("When it became true.")
    )
    invalid_at: JsonAwareDatetime | None = Field(
        default=None, description=("When it stopped being true (null: it is true again).")
    )
    reason: Annotated[str, Field(min_length=1, max_length=1000)] | SkipJsonSchema[None] = Field(
        default=None, description="Why (kept in the history). Default: `edited`."
    )

    @model_validator(mode="after")
    def _something(self) -> MemoryItemUpdate:
        changed = self.model_fields_set - {"reason"}
        if not changed:
            raise ValueError(
                "give at least one of text, importance, tags, key, valid_from, invalid_at"
            )
        if "valid_from" in changed and self.valid_from is None:
            raise ValueError("valid_from cannot be null")
        if (
            self.valid_from is not None
            and self.invalid_at is not None
            and self.invalid_at < self.valid_from
        ):
            raise ValueError("invalid_at is before valid_from")
        return self

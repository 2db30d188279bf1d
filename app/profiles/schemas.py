"""Agent profile API schemas."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, StrictBool

from app.knowledge.schemas import FactsInput
from app.memory.schemas import RomInput


class ProfileUpdate(RomInput):
    """A new profile version: the ROM source new sessions of this agent will freeze."""

    facts: FactsInput | None = Field(
        default=None,
        description=("Default `config.facts` of the agent's new sessions (a session's own wins)."),
    )
    audit: StrictBool | None = Field(
        default=None,
        description=(
            "Default `config.audit` of the agent's new sessions (a session's own wins): record "
            "the manifest of every context build."
        ),
    )


class ProfilePublic(BaseModel):
    agent_id: str
    version: int
    system_prompt: str
    patterns: list[Any]
    backend_schema: Any
    facts: FactsInput | None = None
    audit: bool | None = None
    created_at: datetime

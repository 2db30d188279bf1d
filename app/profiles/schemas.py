"""Agent profile API schemas."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.knowledge.schemas import FactsInput
from app.memory.schemas import RomInput


class ProfileUpdate(RomInput):
    """A new profile version: the ROM source new sessions of this agent will freeze."""

    facts: FactsInput | None = Field(default=None, description=(
        "Default `config.facts` of the agent's new sessions (a session's own wins)."))


class ProfilePublic(BaseModel):
    agent_id: str
    version: int
    system_prompt: str
    patterns: list[Any]
    backend_schema: Any
    facts: FactsInput | None = None
    created_at: datetime

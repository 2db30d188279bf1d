"""Agent profile API schemas."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from app.memory.schemas import RomInput


class ProfileUpdate(RomInput):
    """A new profile version: the ROM source new sessions of this agent will freeze."""


class ProfilePublic(BaseModel):
    agent_id: str
    version: int
    system_prompt: str
    patterns: list[Any]
    backend_schema: Any
    created_at: datetime

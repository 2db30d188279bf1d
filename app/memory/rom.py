"""A session's ROM as its creation resolved it, before memory freezes it (`hooks.freeze_rom`).

The session resource (`app.session_resource.service.create`) reads the agent's profile and
hands the create hooks a `Rom`; memory reads no profile and no session request itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.memory.schemas import RomInput
from app.models.agent_profile import ProfileRow


@dataclass(frozen=True, slots=True)
class Rom:
    """The ROM frozen into a new session: an inline one (no `profile_version`), or the
    agent profile's current version (empty when the agent has none)."""

    profile_version: int | None = None
    system_prompt: str = ""
    patterns: list[Any] = field(default_factory=list)
    backend_schema: Any = None

    @classmethod
    def inline(cls, rom: RomInput) -> Rom:
        return cls(None, rom.system_prompt, rom.patterns, rom.backend_schema)

    @classmethod
    def of_profile(cls, profile: ProfileRow | None) -> Rom:
        if profile is None:
            return cls()
        return cls(profile.version, profile.system_prompt, profile.patterns, profile.backend_schema)

    def stored(self) -> dict[str, Any]:
        """The dict kept in the memory state (`memory_states.rom`)."""
        return {
            "profile_version": self.profile_version,
            "system_prompt": self.system_prompt,
            "patterns": self.patterns,
            "backend_schema": self.backend_schema,
        }

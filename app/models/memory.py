"""Segmented-memory tables, gathered for one import line in ``__init__``."""

from app.models.agent_profile import AgentProfile
from app.models.memory_snapshot import MemorySnapshot
from app.models.memory_state import MemoryState
from app.models.memory_summary import MemorySummary

__all__ = ["AgentProfile", "MemorySnapshot", "MemoryState", "MemorySummary"]

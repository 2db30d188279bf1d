"""The segmented-memory tables (state, summaries, snapshots), gathered for one import line
in ``__init__``. Agent profiles are their own table: ``app.models.agent_profile``."""

from app.models.memory_snapshot import MemorySnapshot
from app.models.memory_state import MemoryState
from app.models.memory_summary import MemorySummary

__all__ = ["MemorySnapshot", "MemoryState", "MemorySummary"]

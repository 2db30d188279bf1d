"""Memory domain errors (rendered through the AppError envelope)."""

from app.core.errors import Conflict, Unprocessable


class StaleMemoryState(Conflict):
    """The session's memory changed since the plan was made: re-plan and retry."""

    code = "stale_memory_state"


class OverBudget(Conflict):
    """The change would make the context larger than the session's budget."""

    code = "over_budget"


class RomFrozen(Conflict):
    """A session's ROM never changes after creation."""

    code = "rom_frozen"


class RomTooLarge(Unprocessable):
    """ROM (and Kernel) may take at most half the budget, so the conversation fits."""

    code = "rom_too_large"

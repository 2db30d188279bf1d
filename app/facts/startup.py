"""Say at start-up why facts would not be extracted (issue 27, finding 13)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("loom.facts")

NO_LLM_LINE = (
    "facts: no LLM configured (LOOM_LLM_PROVIDER and its API key): sessions with "
    "facts on keep their messages, and nothing is extracted until one is"
)


def say_why_facts_wait(settings: Any, llm: Any) -> bool:
    """One line when no LLM is configured (True when said)."""
    if llm is not None:
        return False
    log.warning(NO_LLM_LINE)
    return True

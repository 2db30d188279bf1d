"""Say at start-up why facts would not be extracted."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.config import Settings
    from app.llm.client import LLMClient

log = logging.getLogger("loom.facts")

NO_LLM_LINE = (
    "facts: no LLM configured (LOOM_LLM_PROVIDER and its API key): sessions with "
    "facts on keep their messages, and nothing is extracted until one is"
)


# set by `serve` for the processes it starts once it has said the line itself
SAID_ENV = "_LOOM_NO_LLM_SAID"


def say_why_facts_wait(settings: Settings, llm: LLMClient | None) -> bool:
    """One line when no LLM is configured (True when said), unless `serve` said it for
    every process it started."""
    if llm is not None or os.environ.get(SAID_ENV) == "1":
        return False
    log.warning(NO_LLM_LINE)
    return True


def say_once_for_all(settings: Settings, env: dict[str, str]) -> bool:
    """`serve`: say the line once, in its own process, and keep the API processes and the
    worker it starts (`env`, and this process's own environment for an in-process API)
    from saying it again."""
    from app.llm import get_llm_client

    llm = get_llm_client(settings)
    if llm is not None:
        asyncio.run(llm.aclose())
    if not say_why_facts_wait(settings, llm):
        return False
    env[SAID_ENV] = os.environ[SAID_ENV] = "1"
    return True

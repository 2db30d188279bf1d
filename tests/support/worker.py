"""An arq worker's ctx as its production startup builds it (`workers.settings.startup`),
for tests that call a job or cron function directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.core.config import Settings
from workers.settings import shutdown, startup


@asynccontextmanager
async def worker_ctx(settings: Settings) -> AsyncIterator[dict[str, Any]]:
    """The ctx a worker's jobs get (its `app.state.WorkerState` in it), closed after."""
    ctx: dict[str, Any] = {"settings": settings}
    await startup(ctx)
    try:
        yield ctx
    finally:
        await shutdown(ctx)

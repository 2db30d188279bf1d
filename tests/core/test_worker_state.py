"""The worker builds the state its jobs read: its startup makes the same configuration
calls as the API process (`app.wiring.configure`), and no caches (none of its jobs reads
one); a job reads it with `worker_state`. Importing the worker's settings reads no
environment: they are made when asked for."""

from __future__ import annotations

from typing import Any

import pytest

from app.core import jsonlimits
from app.core.config import Settings
from app.knowledge import filters
from app.state import Caches, app_state, worker_state
from tests.support.worker import worker_ctx


def _caches(caches: Caches) -> list[type]:
    return sorted((type(c) for c in caches), key=lambda t: t.__qualname__)


def test_every_cache_is_read_by_its_class(app: Any) -> None:
    caches = app_state(app).caches
    assert len(caches) >= 4 and all(caches[type(c)] is c for c in caches)
    with pytest.raises(ValueError, match="two parts of class"):
        Caches(*caches, *caches)


async def test_the_worker_builds_the_apps_state(app: Any, settings: Settings) -> None:
    configured = settings.model_copy(update={"max_json_depth": 17, "filter_max_values": 123})
    try:
        async with worker_ctx(configured) as ctx:
            state = worker_state(ctx)
            assert not hasattr(state, "caches")
            assert (jsonlimits.max_depth(), filters.MAX_LIST_VALUES) == (17, 123)
            assert state.settings is configured and state.cron_state == {}
            # the jobs read the state, not loose keys of ctx
            assert not {"db", "llm", "queue"} & ctx.keys()
            # the state is usable: its stores answer
            assert await state.redis.ping()
            async with state.db_connection() as conn:
                assert await conn.fetchval("SELECT 1") == 1
    finally:
        # the process-wide limits back to the app's
        async with worker_ctx(settings):
            pass
    assert jsonlimits.max_depth() == settings.max_json_depth


def test_the_worker_settings_are_made_from_the_settings_given(settings: Settings) -> None:
    import workers.settings as worker_module

    made = worker_module.worker_settings(
        settings.model_copy(update={"queue_name": "loom:q:given", "worker_job_timeout_seconds": 77})
    )
    assert made.queue_name == "loom:q:given" and made.job_timeout == 77
    names = {getattr(f, "name", getattr(f, "__name__", "")) for f in made.functions}
    assert names >= {"ping", "compress_session"}
    # what `arq workers.settings.WorkerSettings` reads: this process's settings, when asked
    assert worker_module.WorkerSettings.queue_name == worker_module.get_settings().queue_name

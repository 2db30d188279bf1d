"""The worker builds the same state as the API process: its startup makes the same
configuration calls (`app.wiring.configure`) and the same caches (`app.wiring.caches`),
each read by its class and forgotten through `Caches.forget`; a job reads it with `worker_state`."""

from __future__ import annotations

import uuid
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
            api = app_state(app)
            assert _caches(state.caches) == _caches(api.caches)
            assert state.caches is not api.caches  # its own, in its own process
            assert not {id(c) for c in state.caches} & {id(c) for c in api.caches}
            assert (jsonlimits.max_depth(), filters.MAX_LIST_VALUES) == (17, 123)
            assert state.settings is configured and state.cron_state == {}
            # the jobs read the state, not loose keys of ctx
            assert not {"sessionmaker", "llm", "queue"} & ctx.keys()
            # the state is usable: its caches forget, its stores answer
            state.caches.forget(uuid.uuid4(), [uuid.uuid4()])
            assert await state.redis.ping()
            async with state.sessionmaker() as db:
                assert (await db.connection()).closed is False
    finally:
        # the process-wide limits back to the app's
        async with worker_ctx(settings):
            pass
    assert jsonlimits.max_depth() == settings.max_json_depth

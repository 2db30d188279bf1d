"""Issue 37, finding 8: the cost does not depend on how people type. Turns further apart
than the quiet time cost a run of two messages each (592 calls per 1,000 messages): a
quiet run now needs `LOOM_FACTS_QUIET_MIN_USER` user messages, fewer wait for the idle
time (or the session's end); and a run reads what arrived while it worked only while
`min_batch` of it waits (turns 1 s apart cost a small run after each full one). The
figures: bench/facts_arrival.py."""

from __future__ import annotations

import time

import httpx
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from app.core.config import Settings
from app.facts.extract import tail_due
from app.facts.trigger import extraction_due
from tests.facts.helpers import talk
from tests.facts.support import facts_session
from tests.jobs.support import drain_queue


def test_a_quiet_run_needs_three_user_messages_else_the_idle_time() -> None:
    def due(waiting: int, users: int) -> float | None:
        return extraction_due(
            waiting, 6, 60, users_waiting=users, quiet_min_user=3, idle_seconds=900.0
        )

    assert due(2, 1) == 900 and due(4, 2) == 900
    assert due(5, 3) == 60
    assert due(6, 3) == 0
    assert due(0, 0) is None


@given(st.integers(0, 50), st.integers(1, 10), st.integers(0, 50), st.integers(1, 5))
def test_due_is_never_sooner_for_fewer_statements(
    waiting: int, every: int, users: int, min_user: int
) -> None:
    due = extraction_due(
        waiting, every, 60, users_waiting=users, quiet_min_user=min_user, idle_seconds=900
    )
    if waiting <= 0:
        assert due is None
    elif waiting >= every:
        assert due == 0
    else:
        assert due == (60 if users >= min_user else 900)


def test_a_run_reads_what_waited_and_a_tail_only_when_it_is_full() -> None:
    assert tail_due(watermark=0, began=6, last=8, every=6)  # what waited at the start
    assert not tail_due(watermark=6, began=6, last=8, every=6)  # 2 arrived meanwhile
    assert tail_due(watermark=6, began=6, last=12, every=6)  # 6 arrived meanwhile


async def test_a_slow_typist_waits_for_the_idle_time(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    await drain_queue(settings)
    sid = await facts_session(client, scope="project/slow")
    r = aioredis.Redis.from_url(str(settings.redis_url))
    try:
        await talk(client, sid, ("2026-01-10T09:00:00Z", "Hello."))
        at = (await r.zscore(settings.queue_name, f"facts:{sid}") or 0) / 1000
        assert at > time.time() + settings.facts_idle_seconds - 30  # not the quiet time
        await talk(
            client,
            sid,
            ("2026-01-10T09:10:00Z", "I like tea."),
            ("2026-01-10T09:20:00Z", "And jazz."),
        )
        at = (await r.zscore(settings.queue_name, f"facts:{sid}") or 0) / 1000
        assert at <= time.time()  # 6 messages: at once
    finally:
        await r.aclose()

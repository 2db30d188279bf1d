"""Context ids are UUIDv7 (`app.models.base.time_ordered_id`): a recorded build's row goes
in at the end of its table's key index, and ids made later sort later."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from app.models.base import time_ordered_id
from tests.support.api import new_session

times = st.datetimes(
    min_value=datetime(1980, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(times)
def test_a_version_7_rfc_uuid_carrying_its_millisecond(at: datetime) -> None:
    made = time_ordered_id(at)
    assert made.version == 7 and made.variant == uuid.RFC_4122
    assert made.int >> 80 == int(at.timestamp() * 1000)


@given(times, st.integers(min_value=1, max_value=10**9))
def test_later_milliseconds_sort_later(at: datetime, ms: int) -> None:
    later = at + timedelta(milliseconds=ms)
    assert time_ordered_id(at) < time_ordered_id(later)
    assert str(time_ordered_id(at)) < str(time_ordered_id(later))


def test_ids_of_one_millisecond_differ() -> None:
    at = datetime(2026, 11, 26, tzinfo=UTC)
    assert len({time_ordered_id(at) for _ in range(10_000)}) == 10_000


async def test_a_build_answers_with_a_time_ordered_context_id(client) -> None:
    sid = await new_session(client)
    await client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    before = datetime.now(UTC)
    r = await client.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})
    after = datetime.now(UTC)
    made = uuid.UUID(r.json()["context_id"])
    assert made.version == 7
    assert int(before.timestamp() * 1000) <= made.int >> 80 <= int(after.timestamp() * 1000)

"""When an append or the cron pass asks for compression (pure policy)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.memory.pressure import Pressure, append_trigger, is_busy, pressure_from_row
from app.memory.tasks import backoff_seconds


def p(tokens: int, count: int, budget: int = 1000, l1_max: int = 10) -> Pressure:
    return Pressure(budget=budget, memory_tokens=tokens, l1_count=count, l1_max=l1_max)


def test_crossing_usage_triggers_once() -> None:
    assert (
        append_trigger(
            p(710, 5), added_tokens=50, added_messages=1, new_user_turn=False, busy_usage=0.7
        )
        == "usage"
    )
    # already above before this append, not a new turn: the cron pass covers it
    assert (
        append_trigger(
            p(760, 5), added_tokens=50, added_messages=1, new_user_turn=False, busy_usage=0.7
        )
        is None
    )


def test_l1_overflow_triggers() -> None:
    assert (
        append_trigger(
            p(100, 11), added_tokens=10, added_messages=1, new_user_turn=False, busy_usage=0.7
        )
        == "l1_overflow"
    )
    assert (
        append_trigger(
            p(100, 12), added_tokens=10, added_messages=1, new_user_turn=False, busy_usage=0.7
        )
        is None
    )


def test_new_turn_while_busy_triggers() -> None:
    assert (
        append_trigger(
            p(800, 6), added_tokens=10, added_messages=1, new_user_turn=True, busy_usage=0.7
        )
        == "new_turn"
    )
    assert (
        append_trigger(
            p(100, 6), added_tokens=10, added_messages=1, new_user_turn=True, busy_usage=0.7
        )
        is None
    )


@given(
    st.integers(0, 5000), st.integers(0, 500), st.integers(1, 40), st.integers(0, 40), st.booleans()
)
def test_never_triggers_when_not_busy_after(
    tokens: int, added: int, count: int, added_msgs: int, turn: bool
) -> None:
    after = p(tokens, count)
    reason = append_trigger(
        after,
        added_tokens=min(added, tokens),
        added_messages=min(added_msgs, count),
        new_user_turn=turn,
        busy_usage=0.7,
    )
    if reason is not None:
        assert is_busy(after, 0.7)


def test_pressure_from_row_uses_session_config() -> None:
    row = {
        "config": {"max_context_tokens": 2000, "reserved_output_tokens": 200, "l1_max_messages": 4},
        "last_seq": 20,
        "l1_start_seq": 15,
        "fixed_tokens": 300,
        "l1_tokens": 960,
    }
    pr = pressure_from_row(row)
    assert (pr.budget, pr.l1_count, pr.l1_max, pr.memory_tokens) == (1800, 6, 4, 1260)
    assert is_busy(pr, 0.7)
    assert pressure_from_row({**row, "config": {}}).budget == 180_000


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff_seconds(5, t) for t in (1, 2, 3)] == [5, 10, 20]
    assert backoff_seconds(5, 30) == 300
    assert backoff_seconds(0, 4) == 0

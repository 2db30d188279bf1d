"""Issue 37, finding 5: the context says "since" only when it is known when a fact became
true (an event time, or a change the memory observed); otherwise when it was said."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
from hypothesis import given
from hypothesis import strategies as st

from app.facts.policy import when_known
from tests.facts.helpers import SCENARIO, extract, talk
from tests.facts.support import FactModel, Rule, facts_session
from tests.fakes.llm_server import FakeLLMServer

RULES = [
    *SCENARIO,
    Rule(
        "uncle lived in Paris", "The user's uncle lived in Paris in the 1980s.", "user.uncle.city"
    ),
    Rule("born in Lyon", "The user was born in Lyon.", "user.birthplace"),
]


def at(day: int) -> datetime:
    return datetime(2026, 3, day, 9, tzinfo=UTC)


def test_since_only_when_known() -> None:
    assert when_known(at(1), at(5), at(5), replaced=False) == "since 2026-03-01"  # event time
    assert when_known(at(5), at(5), at(5), replaced=False) == "said 2026-03-05"
    assert when_known(at(5), at(5), at(5), replaced=True) == "since 2026-03-05"  # a change
    assert when_known(at(5), None, at(5), replaced=False) == "said 2026-03-05"  # typed in


@given(st.integers(1, 28), st.integers(1, 28), st.booleans())
def test_since_is_said_unless_a_time_was_learnt(v: int, s: int, replaced: bool) -> None:
    label = when_known(at(v), at(s), at(s), replaced=replaced)
    assert label.startswith("since") == (replaced or v != s)


async def test_the_context_says_since_only_when_known(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel(RULES))
    sid = await facts_session(llm_client)
    await talk(
        llm_client,
        sid,
        ("2026-01-10T09:00:00Z", "I prefer tea."),
        ("2026-01-11T09:00:00Z", "My uncle lived in Paris back then."),
        ("2026-01-12T09:00:00Z", "I was born in Lyon."),
        ("2026-03-05T09:00:00Z", "I moved to Berlin last month."),
        ("2026-03-06T09:00:00Z", "I switched to coffee."),
    )
    await extract(llm_client, sid)
    later = await facts_session(llm_client)
    await talk(llm_client, later, ("2026-04-01T09:00:00Z", "Hello again."))
    ctx = (await llm_client.post(f"/v1/sessions/{later}/context", json={"format": "raw"})).json()
    block = ctx["layers"]["facts"]["text"]
    assert "(since 2026-02-01)" in block.split("lives in Berlin.")[1].splitlines()[0], block
    assert "- The user's uncle lived in Paris in the 1980s. (said 2026-01-11)" in block, block
    assert "- The user was born in Lyon. (said 2026-01-12)" in block, block
    # coffee replaced tea: the memory saw the change happen
    assert "- The user prefers coffee in the morning. (since 2026-03-06)" in block, block
    assert '"since": when it became true; "said": when it was said' in block

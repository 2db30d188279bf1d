"""Issue 45, the long run in its short form (the full two years and 2,000+ facts:
`bench/facts_years.py`): half a year of one life through HTTP with the imperfect model of
`tests.facts.years` (keys varied across aliases and subjects, malformed keys, stray fields,
bad JSON; late old sessions, an imported one, deletions, a second user). No attribute with
two current values, no false current fact, no true fact lost, `as_of` right at 10 dates
for every single-valued attribute, and the context of a new session names the current home
and job only."""

from __future__ import annotations

import httpx

from tests.facts.years import build, live, table
from tests.fakes.llm_server import FakeLLMServer


async def test_months_of_a_life_with_an_imperfect_model(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    sc = build(days=180, every=6, trivia=6)
    report = await live(llm_client, fake_llm, sc, "agent", "agent/agent-1")
    print("\n--- issue 45, short form\n" + table(report))
    assert not report.two_current, report.two_current
    assert not report.false_current, report.false_current
    assert not report.lost, report.lost
    assert report.as_of_right == report.as_of_checks, report.as_of_wrong
    assert report.context_ok, report.context_names
    assert report.other_user_ok
    assert report.max_request_tokens <= 8000

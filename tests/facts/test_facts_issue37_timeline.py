"""Issue 37, finding 3: statements are compared like with like (event times when both
have one, else when each was said); an older statement of another value is history of
its own, never support of the newer one; a late old statement fits the timeline it lands
in (no two homes at once)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import httpx
from hypothesis import given
from hypothesis import strategies as st

from app.knowledge.timeline import Said, fit_in_timeline, is_older
from tests.facts.helpers import extract, history, scope_facts, talk
from tests.facts.support import FactModel, Rule, facts_session
from tests.fakes.llm_server import FakeLLMServer

BASE = datetime(2026, 1, 1, 9, tzinfo=UTC)


def d(n: int) -> datetime:
    return BASE + timedelta(days=n)


def iso(n: int) -> str:
    return d(n).isoformat().replace("+00:00", "Z")


def test_like_with_like() -> None:
    typed_today = Said(d(300), d(300))  # no event time: only when it was typed
    rome = Said(d(293), d(301))  # "moved to Rome last week", said after it
    assert not is_older(rome, typed_today) and is_older(typed_today, rome)
    assert is_older(Said(d(10), d(90)), Said(d(20), d(30)))  # both event times
    assert is_older(Said(d(60), d(60)), Said(d(70), d(70)))  # both said


def test_a_late_statement_fits_its_slot() -> None:
    chain = [("a", d(0), d(50)), ("b", d(50), d(100)), ("c", d(100), d(150)), ("f", d(150), None)]
    slot = fit_in_timeline(d(75), chain)
    assert (slot.cut, slot.successor, slot.until) == ("b", "c", d(100))
    slot = fit_in_timeline(d(-5), chain)
    assert (slot.cut, slot.successor, slot.until) == (None, "a", d(0))


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=8, unique=True), st.integers(-10, 1010))
def test_a_fitted_statement_never_overlaps(starts: list[int], at: int) -> None:
    starts = sorted(starts)
    chain = [
        (str(i), d(s), d(starts[i + 1]) if i + 1 < len(starts) else None)
        for i, s in enumerate(starts)
    ]
    slot = fit_in_timeline(d(at), chain)
    # after the fit: the cut fact ends at `at`, the new one covers [at, until)
    ends = {f[0]: f[2] for f in chain}
    if slot.cut is not None:
        ends[slot.cut] = d(at)
    intervals = [(f[1], ends[f[0]]) for f in chain] + [(d(at), slot.until)]
    for k in range(-10, 1011, 7):
        t = d(k)
        holding = [a for a, b in intervals if a <= t and (b is None or t < b)]
        assert len(holding) <= 1, (t, intervals)


async def test_a_hand_typed_fact_does_not_beat_a_later_statement(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    def week_before(said: date) -> str:
        return (said - timedelta(days=7)).isoformat()

    fake_llm.respond_with_tools(
        FactModel(
            [Rule("moved to Rome", "The user lives in Rome.", "user.home_city", when=week_before)]
        )
    )
    r = await llm_client.post(
        "/v1/memory-items",
        json={"scope": "project/rome", "kind": "fact", "text": "The user resides in Vienna."},
    )
    vienna = r.json()["id"]
    await llm_client.patch(
        f"/v1/memory-items/{vienna}", headers={"If-Match": '"1"'}, json={"key": "user.home_city"}
    )
    sid = await facts_session(llm_client, scope="project/rome")
    now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    said = now.isoformat().replace("+00:00", "Z")
    await talk(llm_client, sid, (said, "I moved to Rome last week."))
    result = (await extract(llm_client, sid))["result"]
    assert result["invalidated"] == 1 and result["history"] == 0, result
    facts = {f["text"]: f for f in await scope_facts(llm_client, "project/rome")}
    rome = facts["The user lives in Rome."]
    assert rome["invalid_at"] is None
    assert facts["The user resides in Vienna."]["superseded_by"] == rome["id"]


async def test_an_older_job_is_history_not_support(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(
        FactModel(
            [
                Rule("work as a nurse", "The user works as a nurse.", "user.job", update=True),
                Rule("I now teach", "The user works as a teacher.", "user.job", update=True),
            ]
        )
    )
    scope = "project/nurse"
    old = await facts_session(llm_client, scope=scope)
    new = await facts_session(llm_client, scope=scope)
    await talk(llm_client, old, (iso(10), "I work as a nurse."))
    await talk(llm_client, new, (iso(70), "I'm no longer a nurse, I now teach."))
    await extract(llm_client, new)
    result = (await extract(llm_client, old))["result"]  # the older one, extracted later
    assert result["history"] == 1, result
    facts = {f["text"]: f for f in await scope_facts(llm_client, scope)}
    teacher, nurse = facts["The user works as a teacher."], facts["The user works as a nurse."]
    assert teacher["sources"] == [{"session_id": new, "seqs": [1]}]
    assert [v["change"] for v in (await history(llm_client, teacher["id"]))["versions"]] == ["add"]
    assert (nurse["valid_from"], nurse["invalid_at"]) == (iso(10), iso(70))
    assert nurse["superseded_by"] == teacher["id"]
    then = await scope_facts(llm_client, scope, as_of=iso(40))
    assert [f["text"] for f in then] == ["The user works as a nurse."]


async def test_a_late_old_home_fits_between_the_others(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    cities = ["Lisbon", "Porto", "Seville", "Lyon", "Turin", "Ghent"]
    rules = [Rule(f"live in {c}", f"The user lives in {c}.", "user.home_city") for c in cities]
    rules.append(Rule("live in Madrid", "The user lives in Madrid.", "user.home_city"))
    fake_llm.respond_with_tools(FactModel(rules))
    scope = "project/madrid"
    for k, city in enumerate(cities):  # day 0, 50, ..., 250
        sid = await facts_session(llm_client, scope=scope)
        await talk(llm_client, sid, (iso(50 * k), f"Now I live in {city}."))
        await extract(llm_client, sid)
    late = await facts_session(llm_client, scope=scope)
    await talk(llm_client, late, (iso(75), "These days I live in Madrid."))
    await extract(llm_client, late)
    facts = {f["text"]: f for f in await scope_facts(llm_client, scope)}
    madrid, porto = facts["The user lives in Madrid."], facts["The user lives in Porto."]
    assert (madrid["valid_from"], madrid["invalid_at"]) == (iso(75), iso(100))
    assert madrid["superseded_by"] == facts["The user lives in Seville."]["id"]
    assert (porto["invalid_at"], porto["superseded_by"]) == (iso(75), madrid["id"])
    for day, city in [
        (60, "Porto"),
        (80, "Madrid"),
        (120, "Seville"),
        (170, "Lyon"),
        (260, "Ghent"),
    ]:
        then = await scope_facts(llm_client, scope, as_of=iso(day))
        assert [f["text"] for f in then] == [f"The user lives in {city}."], (day, then)

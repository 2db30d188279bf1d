"""Facts that stay true (issue 27), end to end through HTTP with the scripted model of
tests/fakes/fact_model.py, which answers from the prompts it receives: Paris then Berlin
"last month", a pet that died, a job refined then changed, an older session extracted
after a newer one, one batch against ten, and `as_of`."""

from __future__ import annotations

import json

import httpx

from tests.facts.helpers import (
    SCENARIO,
    day,
    extract,
    history,
    scope_facts,
    talk,
    timeline,
)
from tests.facts.support import FactModel, facts_session
from tests.fakes.llm_server import FakeLLMServer

AGENT = "agent/agent-1"


async def test_paris_then_berlin_last_month(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    model = FactModel(SCENARIO)
    fake_llm.respond_with_tools(model)
    january = await facts_session(llm_client)
    await talk(llm_client, january, ("2026-01-10T09:00:00Z", "Hi! I live in Paris."))
    first = await extract(llm_client, january)
    assert first["result"]["added"] == 1 and model.calls == ["record_facts"]

    march = await facts_session(llm_client)
    await talk(
        llm_client, march, ("2026-03-05T09:00:00Z", "Big news: I moved to Berlin last month.")
    )
    second = await extract(llm_client, march)
    assert (second["result"]["added"], second["result"]["invalidated"]) == (1, 1)
    assert model.calls == ["record_facts", "record_facts", "decide_facts"]
    # the decision prompt showed the stored Paris fact with its id, key and times
    decide = model.prompts[-1][1]
    facts = {f["text"]: f for f in await scope_facts(llm_client, AGENT)}
    paris, berlin = facts["The user lives in Paris."], facts["The user lives in Berlin."]
    assert (
        f"- id={paris['id']} key=user.home_city (since 2026-01-10 09:00 UTC, said "
        "2026-01-10 09:00 UTC): The user lives in Paris."
    ) in decide
    assert (
        "key=user.home_city; valid from 2026-02-01 00:00 UTC, stated 2026-03-05 09:00 "
        f"UTC; session {march} msg 1): The user lives in Berlin."
    ) in decide

    # event time and statement time both kept; Paris ends when Berlin began
    assert berlin["valid_from"].startswith("2026-02-01T00:00:00")
    assert berlin["stated_at"].startswith("2026-03-05T09:00:00")
    assert berlin["key"] == "user.home_city" and berlin["invalid_at"] is None
    assert berlin["sources"] == [{"session_id": march, "seqs": [1]}]
    assert paris["invalid_at"].startswith("2026-02-01T00:00:00")
    assert paris["superseded_by"] == berlin["id"]
    h = await history(llm_client, paris["id"])
    assert [
        (v["version"], v["change"], v["actor"], v["actor_agent_id"]) for v in h["versions"]
    ] == [(1, "add", "extraction", "agent-1"), (2, "invalidate", "extraction", "agent-1")]
    assert f"session {march} msg 1" in h["versions"][1]["reason"]

    # "where did the user live in January?", and in mid-February (said only in March)
    assert [
        f["text"] for f in await scope_facts(llm_client, AGENT, as_of="2026-01-20T00:00:00Z")
    ] == ["The user lives in Paris."]
    assert [
        f["text"] for f in await scope_facts(llm_client, AGENT, as_of="2026-02-15T00:00:00Z")
    ] == ["The user lives in Berlin."]
    assert await scope_facts(llm_client, AGENT, as_of="2026-01-01T00:00:00Z") == []

    # a later session: Berlin, since February, in its context; Paris nowhere
    later = await facts_session(llm_client)
    await talk(llm_client, later, ("2026-04-01T09:00:00Z", "Where do I live again?"))
    ctx = (await llm_client.post(f"/v1/sessions/{later}/context", json={"format": "raw"})).json()
    block = ctx["layers"]["facts"]["text"]
    assert "- The user lives in Berlin. (since 2026-02-01)" in block and "Paris" not in block
    then = (
        await llm_client.post(
            f"/v1/sessions/{later}/context",
            json={"format": "raw", "facts_as_of": "2026-01-20T00:00:00Z"},
        )
    ).json()
    block_then = then["layers"]["facts"]["text"]
    assert "Paris" in block_then and "Berlin" not in block_then

    print("\n--- the walkthrough (issue 27) ---")
    print("session", january, "msg 1 2026-01-10 09:00 user: Hi! I live in Paris.")
    print("session", march, "msg 1 2026-03-05 09:00 user: Big news: I moved to Berlin last month.")
    print("\nthe decision prompt of the March extraction:\n" + decide)
    shown = (
        "text",
        "key",
        "valid_from",
        "stated_at",
        "invalid_at",
        "superseded_by",
        "sources",
        "version",
    )
    for f in (paris, berlin):
        print(f"\nfact {f['id']}: {json.dumps({k: f[k] for k in shown})}")
        for v in (await history(llm_client, f["id"]))["versions"]:
            print(
                f"  v{v['version']} {v['change']} by {v['actor']}/{v['actor_agent_id']}: "
                f"valid {day(v['valid_from'])}..{day(v['invalid_at'])}; {v['reason']}"
            )
    print("\ncontext of a later session (facts block):\n" + block)
    print("\nthe same build with facts_as_of 2026-01-20:\n" + block_then)


async def test_a_pet_that_died_and_a_job_refined_then_changed(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    sid = await facts_session(llm_client)
    await talk(
        llm_client,
        sid,
        ("2026-01-05T09:00:00Z", "I have a cat called Tom."),
        ("2026-01-05T10:00:00Z", "I work as a teacher."),
    )
    await extract(llm_client, sid)
    await talk(llm_client, sid, ("2026-02-10T09:00:00Z", "I teach maths at Lycee Hoche."))
    refined = (await extract(llm_client, sid))["result"]
    assert (refined["updated"], refined["added"]) == (1, 0)
    [job] = [f for f in await scope_facts(llm_client, AGENT) if f["key"] == "user.job"]
    # the update took effect when it was said, and provenance accumulates
    assert job["text"] == "The user works as a maths teacher at Lycee Hoche."
    assert job["valid_from"].startswith("2026-02-10T09:00:00") and job["version"] == 2
    assert job["sources"] == [{"session_id": sid, "seqs": [3, 5]}]
    h = await history(llm_client, job["id"])
    assert [(v["change"], day(v["valid_from"]), v["sources"]) for v in h["versions"]] == [
        ("add", "2026-01-05", [{"session_id": sid, "seqs": [3]}]),
        ("update", "2026-02-10", [{"session_id": sid, "seqs": [3, 5]}]),
    ]
    # as of January the job read as it did then
    [then] = [
        f
        for f in await scope_facts(llm_client, AGENT, as_of="2026-01-20T00:00:00Z")
        if f["key"] == "user.job"
    ]
    assert then["text"] == "The user works as a teacher."

    await talk(
        llm_client,
        sid,
        ("2026-03-01T09:00:00Z", "Sadly Tom died last week."),
        ("2026-03-02T09:00:00Z", "And I joined Globex as an engineer."),
    )
    changed = (await extract(llm_client, sid))["result"]
    assert (changed["invalidated"], changed["added"]) == (2, 2)
    valid = {f["text"] for f in await scope_facts(llm_client, AGENT) if f["invalid_at"] is None}
    assert valid == {"The user's cat Tom died.", "The user works as an engineer at Globex."}


async def test_an_older_session_extracted_later_never_overrides(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    model = FactModel(SCENARIO)
    fake_llm.respond_with_tools(model)
    march = await facts_session(llm_client)
    january = await facts_session(llm_client)
    await talk(llm_client, january, ("2026-01-10T09:00:00Z", "I live in Paris."))
    await talk(llm_client, march, ("2026-03-05T09:00:00Z", "I moved to Berlin last month."))
    await extract(llm_client, march)
    result = (await extract(llm_client, january))["result"]  # the older one, extracted later
    assert result["history"] == 1 and result["invalidated"] == 0
    facts = {f["text"]: f for f in await scope_facts(llm_client, AGENT)}
    paris, berlin = facts["The user lives in Paris."], facts["The user lives in Berlin."]
    assert berlin["invalid_at"] is None  # still current
    # Paris is history: valid from its own time until Berlin's (no zero-length validity)
    assert paris["valid_from"].startswith("2026-01-10T09:00:00")
    assert paris["invalid_at"].startswith("2026-02-01T00:00:00")
    assert paris["superseded_by"] == berlin["id"]
    assert "kept as history" in (await history(llm_client, paris["id"]))["versions"][0]["reason"]
    assert [
        f["text"] for f in await scope_facts(llm_client, AGENT, as_of="2026-01-20T00:00:00Z")
    ] == ["The user lives in Paris."]


async def test_a_fact_said_again_gathers_its_sources(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    model = FactModel(SCENARIO)
    fake_llm.respond_with_tools(model)
    first = await facts_session(llm_client)
    await talk(llm_client, first, ("2026-01-10T09:00:00Z", "I live in Paris."))
    await extract(llm_client, first)
    again = await facts_session(llm_client)
    await talk(llm_client, again, ("2026-02-10T09:00:00Z", "As I said, I live in Paris."))
    result = (await extract(llm_client, again))["result"]
    assert (result["added"], result["unchanged"]) == (0, 1)
    # step 1 was shown the known fact (without ids), step 2 named it
    assert "- key=user.home_city (since 2026-01-10 09:00 UTC" in model.prompts[1][1]
    [paris] = await scope_facts(llm_client, AGENT)
    assert paris["sources"] == [
        {"session_id": first, "seqs": [1]},
        {"session_id": again, "seqs": [1]},
    ]
    assert paris["valid_from"].startswith("2026-01-10")  # a restatement changes no validity
    h = await history(llm_client, paris["id"])
    assert [(v["change"], len(v["sources"])) for v in h["versions"]] == [("add", 1), ("confirm", 2)]


CONVERSATION = [
    ("2026-01-03T09:00:00Z", "Hello, I live in Paris."),
    ("2026-01-04T09:00:00Z", "I prefer tea in the morning."),
    ("2026-01-05T09:00:00Z", "I have a cat called Tom."),
    ("2026-01-06T09:00:00Z", "I work as a teacher."),
    ("2026-01-07T09:00:00Z", "My sister lives in Lisbon."),
    ("2026-02-20T09:00:00Z", "I teach maths at Lycee Hoche."),
    ("2026-03-05T09:00:00Z", "I moved to Berlin last month."),
    ("2026-03-06T09:00:00Z", "I switched to coffee."),
    ("2026-03-07T09:00:00Z", "Tom died, sadly."),
    ("2026-03-08T09:00:00Z", "I joined Globex as an engineer."),
]


async def test_one_batch_or_ten_gives_the_same_facts_and_history(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    once = await facts_session(llm_client, scope="project/once")
    await talk(llm_client, once, *CONVERSATION)
    result = (await extract(llm_client, once))["result"]
    assert result["batches"] == 1 and result["messages"] == 20

    tenfold = await facts_session(llm_client, scope="project/tenfold")
    for turn in CONVERSATION:
        await talk(llm_client, tenfold, turn)
        await extract(llm_client, tenfold)
    one, ten = (
        await timeline(llm_client, "project/once"),
        await timeline(llm_client, "project/tenfold"),
    )
    assert one == ten
    paris = [t for t in one if t[0] == "The user lives in Paris."]
    assert paris == [
        (
            "The user lives in Paris.",
            "2026-01-03T09:00:00Z",
            "2026-02-01T00:00:00Z",
            "The user lives in Berlin.",
            ("add", "invalidate"),
        )
    ]
    assert len(one) == 9  # every state, the job refined in place

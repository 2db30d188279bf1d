"""Issue 37, finding 2: deleting a session removes that session's support. A fact another
session still supports stays (a version `unsupport` records the removed source); a fact
whose last support is gone goes with its history, and the fact it had replaced is current
again (a version `restore`)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from app.facts.support import Supported, plan_release
from tests.facts.helpers import SCENARIO, extract, history, scope_facts, talk
from tests.facts.support import FactModel, Rule, facts_session
from tests.fakes.llm_server import FakeLLMServer

RULES = [*SCENARIO, Rule("allergic to peanuts", "The user is allergic to peanuts.", "user.allergy")]
T = datetime(2026, 2, 1, tzinfo=UTC)


def test_plan_release() -> None:
    s, o = "s", "o"
    touched = [
        Supported("allergy", [{"session_id": s, "seqs": [1]}, {"session_id": o, "seqs": [3]}], s),
        Supported("berlin", [{"session_id": s, "seqs": [1]}], s),
        Supported("rome", [{"session_id": s, "seqs": [2]}], s, T, "oslo"),
    ]
    neighbours = [
        Supported("paris", [{"session_id": o, "seqs": [1]}], o, T, "berlin"),
        Supported("lyon", [{"session_id": o, "seqs": [1]}], o, T, "rome"),
    ]
    plan = plan_release(touched, neighbours, s)
    assert plan.kept == {"allergy": [{"session_id": o, "seqs": [3]}]}
    assert plan.doomed == {"berlin", "rome"}
    assert plan.restored == {"paris": (None, None), "lyon": (T, "oslo")}


async def test_a_session_delete_keeps_what_others_support(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel(RULES))
    scope = "project/deletes"
    first = await facts_session(llm_client, scope=scope)
    await talk(
        llm_client,
        first,
        ("2026-01-10T09:00:00Z", "I live in Paris."),
        ("2026-01-10T09:05:00Z", "I'm allergic to peanuts."),
    )
    await extract(llm_client, first)
    again = await facts_session(llm_client, scope=scope)
    await talk(llm_client, again, ("2026-02-10T09:00:00Z", "Remember, I'm allergic to peanuts."))
    await extract(llm_client, again)
    moved = await facts_session(llm_client, scope=scope)
    await talk(llm_client, moved, ("2026-03-05T09:00:00Z", "I moved to Berlin last month."))
    await extract(llm_client, moved)

    # the session that first mentioned the allergy goes: the allergy stays
    assert (await llm_client.delete(f"/v1/sessions/{first}")).status_code == 204
    facts = {f["text"]: f for f in await scope_facts(llm_client, scope)}
    allergy = facts["The user is allergic to peanuts."]
    assert allergy["invalid_at"] is None and allergy["source_session_id"] == again
    assert allergy["sources"] == [{"session_id": again, "seqs": [1]}]
    h = await history(llm_client, allergy["id"])
    assert [v["change"] for v in h["versions"]] == ["add", "confirm", "unsupport"]
    assert f"session {first} deleted" in h["versions"][-1]["reason"]
    assert all(
        v["source_session_id"] != first and first not in str(v["sources"]) for v in h["versions"]
    )
    # Paris had no other support: gone with the session, and Berlin is current
    assert "The user lives in Paris." not in facts
    assert facts["The user lives in Berlin."]["invalid_at"] is None

    # the session that said "I moved to Berlin" goes: Berlin goes, nothing else replaced
    assert (await llm_client.delete(f"/v1/sessions/{moved}")).status_code == 204
    texts = {f["text"] for f in await scope_facts(llm_client, scope)}
    assert texts == {"The user is allergic to peanuts."}


async def test_deleting_the_move_makes_the_old_home_current_again(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel(RULES))
    scope = "project/undo-move"
    home = await facts_session(llm_client, scope=scope)
    await talk(llm_client, home, ("2026-01-10T09:00:00Z", "I live in Paris."))
    await extract(llm_client, home)
    moved = await facts_session(llm_client, scope=scope)
    await talk(llm_client, moved, ("2026-03-05T09:00:00Z", "I moved to Berlin last month."))
    await extract(llm_client, moved)
    assert (await llm_client.delete(f"/v1/sessions/{moved}")).status_code == 204
    [paris] = await scope_facts(llm_client, scope)
    assert paris["text"] == "The user lives in Paris."
    assert paris["invalid_at"] is None and paris["superseded_by"] is None
    h = await history(llm_client, paris["id"])
    assert [v["change"] for v in h["versions"]] == ["add", "invalidate", "restore"]
    assert "true again" in h["versions"][-1]["reason"]
    now = await scope_facts(llm_client, scope, as_of="2026-04-01")
    assert [f["text"] for f in now] == ["The user lives in Paris."]

"""Issue 37, finding 4: a restatement never moves `valid_from`, and one batch or ten give
the same facts, versions and times (an allergy said at msg 7 and again at msg 19 was valid
from msg 19 with [add] in one batch, from msg 7 with [add, confirm] in ten)."""

from __future__ import annotations

import httpx

from app.facts import prompts
from app.facts.propose import split_restatements
from tests.facts.helpers import SCENARIO, extract, history, scope_facts, talk, timeline
from tests.facts.support import FactModel, Rule, facts_session
from tests.fakes.llm_server import FakeLLMServer

ALLERGY = Rule("allergic to peanuts", "The user is allergic to peanuts.", "user.allergy.peanuts")
TURNS = [
    ("2026-04-02T08:00:00Z", "Hello, I live in Paris."),
    ("2026-04-02T08:02:00Z", "I prefer tea in the morning."),
    ("2026-04-02T08:04:00Z", "Nice weather."),
    ("2026-04-02T08:06:00Z", "By the way, I'm allergic to peanuts."),
    ("2026-04-02T08:08:00Z", "I have a cat called Tom."),
    ("2026-04-02T08:10:00Z", "What's for lunch?"),
    ("2026-04-02T08:12:00Z", "My sister lives in Lisbon."),
    ("2026-04-02T08:14:00Z", "Anything else?"),
    ("2026-04-02T08:16:00Z", "Thanks."),
    ("2026-04-02T08:18:00Z", "Remember, I'm allergic to peanuts: no satay."),
]


def _cand(text: str, seqs: list[int], key: str = "user.x") -> prompts.CandidateFact:
    return prompts.CandidateFact(text=text, key=key, importance=0.5, source_seqs=seqs)


def test_restatements_are_split_from_the_first_statement() -> None:
    first, again = split_restatements(
        [_cand("A", [7]), _cand("B", [9], "user.y"), _cand(" a ", [19]), _cand("A", [7, 21])]
    )
    assert [(c.text, c.source_seqs) for c in first] == [("A", [7]), ("B", [9])]
    assert [(j, c.source_seqs) for j, c in again] == [(0, [19]), (0, [21])]
    # Paris, Berlin, Paris again: a move back, not a restatement
    first, again = split_restatements([_cand("P", [1]), _cand("B", [3]), _cand("P", [5])])
    assert [c.source_seqs for c in first] == [[1], [3], [5]] and again == []


async def test_a_restatement_never_moves_valid_from_in_one_batch_or_ten(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel([*SCENARIO, ALLERGY]))
    once = await facts_session(llm_client, scope="project/allergy-once")
    await talk(llm_client, once, *TURNS)
    assert (await extract(llm_client, once))["result"]["batches"] == 1
    ten = await facts_session(llm_client, scope="project/allergy-ten")
    for turn in TURNS:
        await talk(llm_client, ten, turn)
        await extract(llm_client, ten)
    one_t, ten_t = (
        await timeline(llm_client, "project/allergy-once"),
        await timeline(llm_client, "project/allergy-ten"),
    )
    assert one_t == ten_t
    for scope, sid in (("project/allergy-once", once), ("project/allergy-ten", ten)):
        [allergy] = [f for f in await scope_facts(llm_client, scope) if "peanuts" in f["text"]]
        assert allergy["valid_from"] == "2026-04-02T08:06:00Z", allergy
        assert allergy["stated_at"] == "2026-04-02T08:06:00Z", allergy
        assert allergy["sources"] == [{"session_id": sid, "seqs": [7, 19]}]
        h = await history(llm_client, allergy["id"])
        assert [v["change"] for v in h["versions"]] == ["add", "confirm"]
        assert [v["valid_from"] for v in h["versions"]] == ["2026-04-02T08:06:00Z"] * 2

"""Issue 37, finding 1: contradictions are caught at any store size. The decision prompt
shows what could conflict, most related first (same attribute, the same subject's related
attributes, words; issue 45: no longer filled to its budget with the rest); the
extraction prompt shows the keys in use, so the model reuses `user.home_city` instead of
inventing `user.location`; and a key that holds one value at a time never has two current
facts, whatever the model decides."""

from __future__ import annotations

from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from app.core.tokens import count_text
from app.facts.policy import holds_one_value, related_keys, successions
from tests.facts.helpers import extract, history, scope_facts, seed_facts, talk
from tests.facts.support import FactModel, Rule, facts_session
from tests.fakes.fact_model import STORED
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, ToolUse

HOME = ("user.home_city", ("user.location", "user.residence"))


def home(trigger: str, city: str) -> Rule:
    return Rule(trigger, f"The user lives in {city}.", HOME[0], aliases=HOME[1])


def test_related_keys_and_one_value_keys() -> None:
    assert related_keys("user.home_city", "user.location")
    assert related_keys("user.job", "user.employer") and related_keys("user.city", "user.home_city")
    assert not related_keys("user.home_city", "user.sister.home_city")
    assert not related_keys("user.home_city", "user.allergy")
    assert holds_one_value("user.home_city") and holds_one_value("user.diet")
    assert not holds_one_value("user.allergy") and not holds_one_value("user.pet.name")
    assert holds_one_value("user.allergy", True) and not holds_one_value("user.home_city", False)


@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(1, 100)), max_size=8, unique_by=lambda t: t[0]
    )
)
def test_successions_chain_every_current_fact_but_the_latest(facts: list[tuple[int, int]]) -> None:
    from datetime import UTC, datetime, timedelta

    base = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(i, base + timedelta(days=d), None) for i, d in facts]
    pairs = successions(rows)
    assert len(pairs) == max(0, len(rows) - 1)
    replaced = {a for a, _ in pairs}
    left = [r for r in rows if r[0] not in replaced]
    assert len(left) == min(1, len(rows))
    if left:
        assert left[0][1] == max(r[1] for r in rows)


async def test_the_model_reuses_a_key_the_prompt_shows(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    model = FactModel([home("I live in Paris", "Paris"), home("now based in Hamburg", "Hamburg")])
    fake_llm.respond_with_tools(model)
    first = await facts_session(llm_client, scope="project/vocab")
    await talk(llm_client, first, ("2026-01-10T09:00:00Z", "I live in Paris."))
    await extract(llm_client, first)
    second = await facts_session(llm_client, scope="project/vocab")
    await talk(llm_client, second, ("2026-03-10T09:00:00Z", "I'm now based in Hamburg."))
    await extract(llm_client, second)
    prompt = [p for tool, p in model.prompts if tool == "record_facts"][-1]
    [paris] = [f for f in await scope_facts(llm_client, "project/vocab") if "Paris" in f["text"]]
    assert f"<keys>\n{paris['key']} (1)\n</keys>" in prompt, prompt
    current = [
        f["text"] for f in await scope_facts(llm_client, "project/vocab") if f["invalid_at"] is None
    ]
    assert current == ["The user lives in Hamburg."]


def lazy(model: FactModel) -> Any:
    """A model that records well but never decides: every new fact is ADD."""

    def answer(req: RecordedRequest) -> Any:
        if req.tool_name == "decide_facts":
            model.calls.append("decide_facts")
            n = len([1 for line in req.text.splitlines() if line.startswith("New fact ")])
            return {"decisions": [{"candidate": i, "op": "ADD"} for i in range(n)]}
        return model(req)

    return answer


async def test_a_one_value_key_never_has_two_current_facts(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    rules = [
        Rule("I live in Paris", "The user lives in Paris.", "user.home_city"),
        Rule("moved to Berlin", "The user lives in Berlin.", "user.home_city"),
        Rule("vegetarian", "The user is vegetarian.", "user.eating", one_value=True),
        Rule("eat fish again", "The user eats fish again.", "user.eating", one_value=True),
        Rule("allergic to peanuts", "The user is allergic to peanuts.", "user.allergy"),
        Rule("allergic to shellfish", "The user is allergic to shellfish.", "user.allergy"),
    ]
    fake_llm.set_default(ToolUse(lazy(FactModel(rules))))
    sid = await facts_session(llm_client, scope="project/net")
    await talk(
        llm_client,
        sid,
        ("2026-01-10T09:00:00Z", "I live in Paris."),
        ("2026-01-11T09:00:00Z", "I'm vegetarian."),
        ("2026-01-12T09:00:00Z", "I'm allergic to peanuts."),
    )
    await extract(llm_client, sid)
    await talk(
        llm_client,
        sid,
        ("2026-03-10T09:00:00Z", "I moved to Berlin."),
        ("2026-03-11T09:00:00Z", "I eat fish again."),
        ("2026-03-12T09:00:00Z", "I'm allergic to shellfish too."),
    )
    result = (await extract(llm_client, sid))["result"]
    assert result["automatic"] == 2 and result["invalidated"] == 2, result
    facts = {f["text"]: f for f in await scope_facts(llm_client, "project/net")}
    current = sorted(t for t, f in facts.items() if f["invalid_at"] is None)
    assert current == [
        "The user eats fish again.",
        "The user is allergic to peanuts.",
        "The user is allergic to shellfish.",
        "The user lives in Berlin.",
    ]
    paris = facts["The user lives in Paris."]
    assert paris["superseded_by"] == facts["The user lives in Berlin."]["id"]
    assert paris["invalid_at"] == "2026-03-10T09:00:00Z"
    last = (await history(llm_client, paris["id"]))["versions"][-1]
    assert last["change"] == "invalidate" and last["reason"].startswith(
        "automatic: user.home_city holds one value at a time"
    ), last


async def test_the_decision_prompt_shows_the_related_attribute_first(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, db: Any, tenant: Any
) -> None:
    scope = "project/crowded"
    trivia = [
        (f"The user's boss lives in town number {i} near the river.", f"user.boss.t{i}")
        for i in range(420)
    ] + [(f"The user enjoys hobby number {i} at weekends.", f"user.hobby.h{i}") for i in range(80)]
    await seed_facts(
        db,
        tenant.id,
        scope,
        [*trivia, ("The user is based in Paris.", "user.location")],
        "2026-01-01T00:00:00Z",
    )
    model = FactModel([home("I live in Berlin now", "Berlin")])
    fake_llm.respond_with_tools(model)
    sid = await facts_session(llm_client, scope=scope)
    await talk(llm_client, sid, ("2026-03-10T09:00:00Z", "I live in Berlin now."))
    await extract(llm_client, sid)
    [decide] = [p for tool, p in model.prompts if tool == "decide_facts"]
    shown = STORED.findall(decide)
    assert "The user is based in Paris." in [t for _, _, t in shown]
    assert shown[0][2] == "The user is based in Paris."  # the related attribute first
    # issue 45: what could conflict, not the budget filled with the boss's towns
    assert len(shown) <= 20, len(shown)
    [req] = [r for r in fake_llm.requests if r.tool_name == "decide_facts"]
    assert count_text(req.text) < 0.25 * 8000, count_text(req.text)

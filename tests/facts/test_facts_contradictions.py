"""Contradictions are caught however the fact is worded (issue 27, finding 2): each fact
has a subject/attribute key; the decision prompt shows the whole scope when it fits, and
past that every stored fact sharing a candidate's key, then text matches without the
scope's own stop words. The input cap counts the rendered prompt (finding 6)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from app.core.tokens import count_text
from app.main import create_app
from tests.facts.helpers import extract, scope_facts, seed_facts, talk
from tests.facts.support import FactModel, Rule, facts_session, facts_settings
from tests.fakes.llm_server import FakeLLMServer
from tests.support.api import make_client

CAP = 1500
HOBBIES = [
    "chess",
    "rowing",
    "pottery",
    "jazz piano",
    "birdwatching",
    "fencing",
    "origami",
    "salsa",
    "climbing",
    "baking",
    "sailing",
    "archery",
    "knitting",
    "judo",
    "tango",
    "cycling",
    "astronomy",
    "gardening",
    "surfing",
    "calligraphy",
    "poker",
    "skiing",
    "karate",
    "chess problems",
    "violin",
    "drumming",
    "hiking",
    "painting",
    "yoga",
    "running",
    "swimming",
    "rugby",
    "golf",
    "tennis",
    "squash",
    "cricket",
    "bowling",
    "darts",
    "snooker",
    "boxing",
    "sculpture",
    "magic",
    "kayaking",
    "diving",
    "parkour",
    "skating",
    "juggling",
    "quilting",
    "woodwork",
    "beekeeping",
]
STORED = [
    ("The user is based in Paris.", "user.home_city"),
    ("The user is employed by Acme as an accountant.", "user.employer"),
    ("The user owns a dog called Rex.", "user.pet.rex"),
]
CHANGES = [
    Rule("settled in Berlin", "The user's home is now Berlin.", "user.home_city"),
    Rule("started at Globex", "The user works for Globex.", "user.employer"),
    Rule("Rex passed away", "Rex, the user's dog, has died.", "user.pet.rex"),
]


@pytest.fixture(scope="module")
async def small_cap_app(settings: Settings, fake_llm_server: FakeLLMServer) -> AsyncIterator[Any]:
    application = create_app(
        facts_settings(settings, fake_llm_server.base_url, facts_input_tokens=CAP)
    )
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def small(small_cap_app: Any, tenant: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(small_cap_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        yield c


async def seed(client: httpx.AsyncClient, db: Any, tenant: Any) -> None:
    """50 unrelated facts and the 3 that will change, each with its key, said on
    2026-01-01 (issue 37 compares when each was said: facts typed today would be newer
    than the March messages)."""
    facts = [
        (f"The user enjoys {h} at weekends.", f"user.hobby.h{i}") for i, h in enumerate(HOBBIES)
    ] + STORED
    await seed_facts(db, tenant.id, "agent/agent-1", facts, "2026-01-01T00:00:00Z")


def request_tokens(body: dict[str, Any]) -> int:
    parts = [str(body.get("system", ""))]
    parts += [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body.get("messages", [])
    ]
    parts += [json.dumps(t["input_schema"]) for t in body.get("tools", [])]
    return sum(count_text(p) for p in parts)


@pytest.mark.parametrize("crowded", [False, True], ids=["all_shown", "past_the_cap"])
async def test_paraphrased_contradictions_among_50_facts_are_all_found(
    crowded: bool,
    llm_client: httpx.AsyncClient,
    small: httpx.AsyncClient,
    fake_llm: FakeLLMServer,
    db: Any,
    tenant: Any,
) -> None:
    client = small if crowded else llm_client
    model = FactModel(CHANGES)
    fake_llm.respond_with_tools(model)
    await seed(client, db, tenant)
    sid = await facts_session(client)
    await talk(
        client,
        sid,
        ("2026-03-01T09:00:00Z", "I finally settled in Berlin."),
        ("2026-03-02T09:00:00Z", "Also I started at Globex on Monday."),
        ("2026-03-03T09:00:00Z", "Sad news, Rex passed away."),
    )
    result = (await extract(client, sid))["result"]
    assert result["invalidated"] == 3, result
    facts = {f["text"]: f for f in await scope_facts(client, "agent/agent-1")}
    for (old, _), rule in zip(STORED, CHANGES, strict=True):
        assert facts[old]["invalid_at"] is not None, old
        assert facts[old]["superseded_by"] == facts[rule.fact]["id"]
    shown = model.shown_in_decisions()
    assert {t for t, _ in STORED} <= set(shown)
    # issue 45: what could conflict is shown (the changed facts' attributes and
    # related keys, the best text matches), never the 50 hobbies to fill the budget
    assert len(shown) < 53
    for req in fake_llm.requests:  # the cap counts what is sent (finding 6)
        assert request_tokens(req.json) <= (CAP if crowded else 8000) + 50, req.tool_name

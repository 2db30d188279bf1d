"""Issue 37, finding 6: the fact that answers the question is in the context. Asked
"Where do I live?", the block carried 50 trivia facts sharing the word "live" and not the
current "resides in Vienna"; facts are now ranked by what the recall query or the newest
user message asks about (the key's attribute, then words), then importance."""

from __future__ import annotations

from typing import Any

import httpx

from app.facts.policy import context_tier, words_of
from tests.facts.helpers import seed_facts, talk
from tests.facts.support import facts_session

SCOPE = "project/where"


def test_the_tier_of_a_fact_for_a_question() -> None:
    q = words_of("Where do I live now?")
    assert context_tier("user.home_city", "The user resides in Vienna.", q, 0.0) == 0
    assert context_tier(None, "The user resides in Vienna.", q, 0.0) == 1
    assert context_tier("user.boss.t1", "The user's boss lives in Graz.", q, 2.5) == 2
    assert context_tier("user.hobby", "The user enjoys chess.", q, 0.0) == 3
    assert context_tier("user.boss.home_city", "x", words_of("where does my boss live"), 0) == 0


async def test_where_do_i_live_brings_the_current_home(
    client: httpx.AsyncClient, db: Any, tenant: Any
) -> None:
    trivia = [
        (f"The user's boss lives in town number {i} near the old river bridge.", f"user.boss.t{i}")
        for i in range(60)
    ]
    await seed_facts(db, tenant.id, SCOPE, trivia, "2026-01-01T00:00:00Z", importance=0.9)
    r = await client.post(
        "/v1/memory-items",
        json={
            "scope": SCOPE,
            "kind": "fact",
            "text": "The user resides in Vienna.",
            "importance": 0.3,
        },
    )
    vienna = r.json()["id"]
    r = await client.patch(
        f"/v1/memory-items/{vienna}", headers={"If-Match": '"1"'}, json={"key": "user.home_city"}
    )
    assert r.status_code == 200, r.text
    sid = await facts_session(client, scope=SCOPE, share=0.05)
    await talk(client, sid, ("2026-03-01T09:00:00Z", "Where do I live?"))
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
    block = ctx["layers"]["facts"]["text"]
    assert block.splitlines()[2].startswith("- The user resides in Vienna."), block
    # the recall query of the request ranks the facts when given
    other = await facts_session(client, scope=SCOPE, share=0.05)
    await talk(client, other, ("2026-03-01T09:00:00Z", "Hello there."))
    ctx = (
        await client.post(
            f"/v1/sessions/{other}/context",
            json={"format": "raw", "recall": {"query": "where do I live these days"}},
        )
    ).json()
    assert "resides in Vienna" in ctx["layers"]["facts"]["text"].splitlines()[2]

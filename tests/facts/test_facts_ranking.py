"""Facts are ranked as messages are: BM25 of `app.search.bm25` over the scope's facts (N,
avgdl and n(t) from the scope), here checked against the reference on stored vectors."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import sqlalchemy as sa

from app.search import bm25
from tests.facts.support import facts_session

FACTS = [
    "The user drinks coffee every morning before work.",
    "The user prefers green tea in the afternoon.",
    "Coffee and tea both keep the user awake; the user avoids coffee after six.",
    "The user's sister lives in Lisbon and drinks no coffee at all.",
    "The user runs every morning along the river.",
    "The user keeps a morning journal about coffee, coffee beans and coffee shops.",
    "The user works at a bakery.",
]
_ENTRY = re.compile(r"'((?:[^']|'')*)':([0-9A-D,]+)")


def _positions(vector: str) -> dict[str, list[int]]:
    return {
        m.group(1).replace("''", "'"): [int(p.rstrip("ABCD")) for p in m.group(2).split(",")]
        for m in _ENTRY.finditer(vector)
    }


async def test_search_facts_ranks_by_the_reference_bm25(client: Any, tenant: Any, db: Any):
    scope = f"project/rank-{uuid.uuid4().hex[:6]}"
    ids = []
    for i, text in enumerate(FACTS):
        r = await client.post(
            "/v1/memory-items",
            json={"scope": scope, "kind": "fact", "text": text, "importance": 0.5 + i / 100},
        )
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    sid = await facts_session(client, scope=scope)
    query = "coffee in the morning"
    r = await client.post(
        f"/v1/sessions/{sid}/tool-calls",
        json={
            "type": "tool_use",
            "id": "toolu_1",
            "name": "search_facts",
            "input": {"query": query, "limit": 10},
        },
    )
    assert r.status_code == 200, r.text
    got = [f["id"] for f in json.loads(r.json()["content"])["facts"]]

    rows = (
        await db.execute(
            sa.text(
                "SELECT id, to_tsvector('english', text)::text AS v FROM memory_items "
                "WHERE tenant_id = :t AND id = ANY(:ids)"
            ),
            {"t": uuid.UUID(tenant.id), "ids": [uuid.UUID(i) for i in ids]},
        )
    ).all()
    terms = (
        await db.execute(
            sa.text("SELECT tsvector_to_array(to_tsvector('english', :q))"), {"q": query}
        )
    ).scalar_one()
    importance = {i: 0.5 + n / 100 for n, i in enumerate(ids)}
    docs = [
        bm25.Doc(id=str(r.id), lexemes=_positions(r.v), sort_key=(-importance[str(r.id)],))
        for r in rows
    ]
    expected = [d for d, _ in bm25.rank(docs, terms)]
    assert got == expected
    assert got[0] == ids[5]  # three times "coffee" and "morning", in a long fact
    assert ids[6] not in got  # no query word

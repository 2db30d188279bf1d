"""Shortcuts of the issue-27 tests: dated turns, extraction in the request, facts of a scope
with their history."""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes.fact_model import Rule, last_month

SCENARIO = [
    Rule("I live in Paris", "The user lives in Paris.", "user.home_city"),
    Rule(
        "moved to Berlin last month", "The user lives in Berlin.", "user.home_city", when=last_month
    ),
    Rule("I prefer tea", "The user prefers tea in the morning.", "user.morning_drink"),
    Rule("switched to coffee", "The user prefers coffee in the morning.", "user.morning_drink"),
    Rule("cat called Tom", "The user has a cat named Tom.", "user.pet.tom"),
    Rule("Tom died", "The user's cat Tom died.", "user.pet.tom"),
    Rule("I work as a teacher", "The user works as a teacher.", "user.job", update=True),
    Rule(
        "maths at Lycee Hoche",
        "The user works as a maths teacher at Lycee Hoche.",
        "user.job",
        update=True,
    ),
    Rule("joined Globex", "The user works as an engineer at Globex.", "user.job"),
    Rule("sister lives in Lisbon", "The user's sister lives in Lisbon.", "user.sister.home_city"),
]


async def talk(client: httpx.AsyncClient, sid: str, *turns: tuple[str, str]) -> None:
    """Append (time, user text) turns, each answered "Noted." a minute later."""
    msgs: list[dict[str, Any]] = []
    for when, text in turns:
        msgs.append({"role": "user", "content": text, "created_at": when})
        msgs.append(
            {"role": "assistant", "content": "Noted.", "created_at": when.replace(":00Z", ":30Z")}
        )
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def extract(client: httpx.AsyncClient, sid: str, **params: Any) -> dict[str, Any]:
    r = await client.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true", **params})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def scope_facts(
    client: httpx.AsyncClient, scope: str, *, as_of: str | None = None
) -> list[dict[str, Any]]:
    """Every fact of a scope (valid or not; with `as_of`, those true then), oldest first."""
    params: dict[str, str] = {"include_invalidated": "true"}
    if as_of is not None:
        params = {"as_of": as_of}
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        body: dict[str, Any] = {
            "filters": {"kind": "fact", "scope": scope},
            "order_by": "-timestamp",
            "limit": 200,
        }
        if cursor:
            body["cursor"] = cursor
        r = await client.post("/v1/memory-items/query", params=params, json=body)
        assert r.status_code == 200, r.text
        out += r.json()["items"]
        cursor = r.json()["next_cursor"]
        if not cursor:
            return out


async def history(client: httpx.AsyncClient, item_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/memory-items/{item_id}/history")
    assert r.status_code == 200, r.text
    return dict(r.json())


def day(ts: str | None) -> str | None:
    return ts[:10] if ts else None


async def timeline(client: httpx.AsyncClient, scope: str) -> list[tuple[Any, ...]]:
    """What a scope remembers, independent of ids and of when it was extracted: each fact
    (text, valid from, invalid at, the text of its successor, its changes in order)."""
    facts = await scope_facts(client, scope)
    text = {f["id"]: f["text"] for f in facts}
    out = []
    for f in facts:
        h = await history(client, f["id"])
        out.append(
            (
                f["text"],
                f["valid_from"],
                f["invalid_at"],
                text.get(f["superseded_by"]) if f["superseded_by"] else None,
                tuple(v["change"] for v in h["versions"]),
            )
        )
    return sorted(out, key=lambda t: (t[1], t[0]))


async def seed_facts(
    db: Any,
    tenant_id: str,
    scope: str,
    facts: list[tuple[str, str]],
    valid_from: str,
    importance: float = 0.5,
) -> None:
    """Store many facts at once behind the API (text, key), valid from `valid_from`: a
    big store without thousands of requests. Rows as the API writes them."""
    import uuid
    from datetime import datetime

    from app.knowledge.scopes import parse_scope
    from app.knowledge.service import token_cost
    from app.models.memory_item import MemoryItem

    kind, _, sid = scope.partition("/")
    storage = parse_scope(scope).storage_id if kind != "agent" else sid
    at = datetime.fromisoformat(valid_from.replace("Z", "+00:00"))
    for text, key in facts:
        db.add(
            MemoryItem(
                id=uuid.uuid4(),
                tenant_id=uuid.UUID(str(tenant_id)),
                scope_kind=kind,
                scope_id=storage,
                kind="fact",
                source="api",
                tags=[],
                importance=importance,
                text=text,
                token_cost=token_cost("fact", text, None),
                created_at=at,
                updated_at=at,
                valid_from=at,
                stated_at=at,
                version=1,
                fact_key=key,
                sources=[],
                source_seqs=[],
            )
        )
    await db.commit()

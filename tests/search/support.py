"""Helpers for search and tool tests: sessions with messages, an app with the fake LLM."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.api import new_session


async def append(
    client: httpx.AsyncClient, session_id: str, texts: list[str], roles: list[str] | None = None
) -> list[int]:
    """Append plain-text messages (alternating user/assistant unless roles given)."""
    seqs: list[int] = []
    for start in range(0, len(texts), 500):
        chunk = texts[start : start + 500]
        msgs = [
            {
                "role": (
                    roles[start + i] if roles else ("user" if (start + i) % 2 == 0 else "assistant")
                ),
                "content": t,
            }
            for i, t in enumerate(chunk)
        ]
        resp = await client.post(f"/v1/sessions/{session_id}/messages", json={"messages": msgs})
        assert resp.status_code == 201, resp.text
        seqs += [m["seq"] for m in resp.json()["messages"]]
    return seqs


async def search(
    client: httpx.AsyncClient, session_id: str, query: str, **kw: Any
) -> dict[str, Any]:
    resp = await client.post(
        f"/v1/sessions/{session_id}/search", json={"query": query, "rerank": False, **kw}
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def seqs_of(result: dict[str, Any]) -> list[int]:
    return [r["seq"] for r in result["results"]]


async def compressed_session(client, n=40, **config):
    """A session whose older messages have left L1 (so they can be promoted)."""
    sid = await new_session(client, **config)
    await append(client, sid, [f"message {i}: the lighthouse keeper logs {i}" for i in range(n)])
    resp = await client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
    assert resp.status_code in (200, 202), resp.text
    mem = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    return sid, mem


async def over_budget_session(client):
    """Ten large swap messages about zebras that cannot all fit a 1,000-token window."""
    sid = await new_session(client, max_context_tokens=1000)
    big = [f"zebra {i} " + "stripes and savanna grass " * 40 for i in range(10)]
    await append(client, sid, big + [f"short {i}" for i in range(12)])
    resp = await client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
    assert resp.status_code in (200, 202), resp.text
    mem = (await client.get(f"/v1/sessions/{sid}/memory")).json()
    assert mem["l1_start_seq"] > 10, mem
    return sid

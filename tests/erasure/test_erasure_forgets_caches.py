"""Erasing a session through the API empties this process's caches of it: the recall
reads and the heuristic stand-ins a context build left in the app's state
(`app.state.Caches`), through the one call erasure makes (`Caches.forget`)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from app.context.recent_reads import RecallGroups, RecallSearches, RecentReads
from app.memory.aggregate import StandIns
from app.state import Caches, app_state
from tests.support.api import new_session

FILLER = ["we compared lunch menus", "the printer jammed again", "the bridge was slow"]


async def _long_session(client: httpx.AsyncClient) -> uuid.UUID:
    """A session whose context needs recall (a tool's answer far back: its group is read
    around the hit) and stand-ins (more L1 than the budget holds, no compression run)."""
    sid = await new_session(client, max_context_tokens=20_000, recall={"share": 0.1})
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Look my sister up."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "Wilhelmina, your sister, lives in Reykjavik.",
                }
            ],
        },
    ]
    messages += [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{FILLER[i % 3]} ({i})"}
        for i in range(200)
    ]
    messages.append({"role": "user", "content": "Where does my sister Wilhelmina live?"})
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text
    r = await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["recall"]["seqs"] and body["compression"]["stand_in_ranges"], body["recall"]
    return uuid.UUID(sid)


def _holding(caches: Caches, tenant: uuid.UUID, session: uuid.UUID) -> list[str]:
    """The caches holding entries of the session."""
    named: dict[str, StandIns | RecentReads] = {
        "stand_ins": caches[StandIns],
        "recall_searches": caches[RecallSearches],
        "recall_groups": caches[RecallGroups],
    }
    return [name for name, cache in named.items() if (tenant, session) in cache.sessions()]


async def test_session_delete_forgets_its_cached_reads_and_stand_ins(
    client: httpx.AsyncClient, app: Any, tenant: Any
) -> None:
    caches = app_state(app).caches
    tid = uuid.UUID(tenant.id)
    kept, erased = await _long_session(client), await _long_session(client)
    everything = ["stand_ins", "recall_searches", "recall_groups"]
    assert _holding(caches, tid, kept) == _holding(caches, tid, erased) == everything

    r = await client.delete(f"/v1/sessions/{erased}")
    assert r.status_code == 204, r.text
    receipt = (await client.get(r.headers["location"])).json()
    assert receipt["status"] == "completed"
    # the runner publishes the erase event; this process hears it on its subscription
    for _ in range(100):
        if not _holding(caches, tid, erased):
            break
        await asyncio.sleep(0.05)
    assert _holding(caches, tid, erased) == []
    assert _holding(caches, tid, kept) == everything  # another session's entries stay
    r = await client.post(f"/v1/sessions/{kept}/context", json={"format": "raw"})
    assert r.status_code == 200 and r.json()["recall"]["seqs"]

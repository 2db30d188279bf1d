"""A large message within the limits is stored whole and answered at once (issue 44,
finding 6): its search index covers its first `SEARCH_INDEX_CHARS` characters, so the
work an append does in the database is bounded whatever the message's size (a 5 MB
message's text indexing outlived the request's deadline on a loaded machine, and a text
with more than 1 MiB of distinct words cannot be one PostgreSQL `tsvector` at all)."""

from __future__ import annotations

import random
import string
import time
from typing import Any

import httpx
import sqlalchemy as sa

from app.models.message import SEARCH_INDEX_CHARS
from tests.support.api import new_session


def _words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 10)))
        for _ in range(n)
    )


async def test_a_5_mb_message_is_stored_whole_and_indexed_up_to_the_bound(
    client: httpx.AsyncClient, db: Any
) -> None:
    sid = await new_session(client)
    # distinct words: their tsvector alone would be several MiB
    body = "zebracorn opens the file. " + _words(700_000, 1) + " quokkamarine closes it."
    assert 5_000_000 < len(body.encode()) < 8 * 1024 * 1024
    started = time.monotonic()
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": body}]},
    )
    took = time.monotonic() - started
    assert r.status_code == 201, r.text[:500]
    print(f"5 MB append: {took:.2f} s")
    row = (
        await db.execute(
            sa.text(
                "SELECT length(content #>> '{}') AS n, length(text) AS text_chars, search_length "
                "FROM messages WHERE session_id = :s"
            ),
            {"s": sid},
        )
    ).one()
    assert row.n == len(body) and row.text_chars == len(body)  # stored whole
    assert 0 < row.search_length <= SEARCH_INDEX_CHARS
    got = await client.get(f"/v1/sessions/{sid}/messages")
    assert got.json()["items"][0]["content"] == body
    found = await client.post(
        f"/v1/sessions/{sid}/search", json={"query": "zebracorn", "rerank": False}
    )
    assert [h["seq"] for h in found.json()["results"]] == [1], found.text[:300]
    past = await client.post(
        f"/v1/sessions/{sid}/search", json={"query": "quokkamarine", "rerank": False}
    )
    assert past.json()["results"] == [], "words past the bound are not indexed"

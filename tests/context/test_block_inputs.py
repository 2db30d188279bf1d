"""What the block providers match against: the newest user message with text, taken from the
L1 the build read (no query of its own), read from the database only when L1 holds none."""

from __future__ import annotations

import uuid
from contextlib import nullcontext
from typing import Any, cast

from app.context import blocks as registry
from app.context.builder import newest_user_with_text
from app.models.message import StoredMessage
from app.models.session import SessionRow
from app.sessions import repository as sessions_repo
from tests.support.api import create_session
from tests.support.sa_conn import driver_connection


def _row(seq: int, role: str, content: Any) -> StoredMessage:
    return StoredMessage(
        session_id="s", seq=seq, role=role, content=content, tool_calls=None,
        tool_use_id=None, is_error=False, name=None, token_count=5, meta={}, created_at=None,
    )  # fmt: skip


def test_newest_user_with_text_skips_other_roles_and_empty_messages() -> None:
    image = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                          "data": "AA=="}}]  # fmt: skip
    rows = [
        _row(1, "user", "I live in Paris"),
        _row(2, "assistant", "Noted."),
        _row(3, "user", "Actually I moved to Berlin"),
        _row(4, "user", image),
        _row(5, "assistant", "Berlin it is."),
    ]
    assert newest_user_with_text(rows) == "Actually I moved to Berlin"
    assert newest_user_with_text(rows[:2]) == "I live in Paris"
    assert newest_user_with_text([rows[1], rows[3], rows[4]]) is None
    assert newest_user_with_text([]) is None


async def test_a_known_text_is_used_without_the_database() -> None:
    # no database at all: reading would raise
    row = cast(SessionRow, object())  # never read: the known text is the answer
    assert await registry.newest_user_text(None, row, "from L1") == "from L1"


async def test_without_a_known_text_it_is_read(client, db, tenant) -> None:
    session = await create_session(client, "agent-1")
    sid = session["id"]
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "an answer"},
            {"role": "user", "content": "the newest question"},
            {"role": "assistant", "content": "another answer"},
        ]},
    )  # fmt: skip
    assert r.status_code in (200, 201), r.text
    row = await sessions_repo.get(await driver_connection(db), uuid.UUID(tenant.id), uuid.UUID(sid))
    assert row is not None
    conn = await driver_connection(db)
    assert await registry.newest_user_text(conn, row, None) == "the newest question"


async def test_collect_hands_every_provider_the_newest_user_text(db) -> None:
    seen: list[str | None] = []

    async def provider(open_db, session_row, budget_tokens, newest_user, *, as_of, query):
        seen.append(newest_user)
        return registry.ContextBlock(name=f"b{len(seen)}", text="x", token_count=1)

    blocks = await registry.collect(
        lambda: nullcontext(db),
        cast(SessionRow, object()),
        100,
        (provider, provider),
        "the question",
    )
    assert [b.name for b in blocks] == ["b1", "b2"]
    assert seen == ["the question", "the question"]

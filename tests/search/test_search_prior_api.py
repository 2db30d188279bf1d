"""The prior through HTTP (issue 48): every append stores each message's prior and time
flag as `app.messages.prior` computes them, across batches too; the SQL ranking with the
prior, the leaning window and time questions matches the reference (`rank_windowed`)."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from app.messages import prior as P
from bench.search_corpus import conversation, queries
from tests.search.support import append
from tests.search.test_bm25_equivalence import check
from tests.support.api import new_session


async def stored(db: Any, tenant_id: str, sid: str) -> list[tuple[float, bool]]:
    await db.rollback()
    rows = await db.execute(
        sa.text(
            "SELECT prior, timed FROM messages WHERE tenant_id = :t AND session_id = :s "
            "ORDER BY seq"
        ),
        {"t": uuid.UUID(tenant_id), "s": uuid.UUID(sid)},
    )
    return [(float(p), bool(t)) for p, t in rows]


def as_real(values: list[tuple[float, bool]]) -> list[tuple[float, bool]]:
    return [(pytest.approx(p, abs=1e-4), t) for p, t in values]  # type: ignore[misc]


async def test_appends_store_the_prior_across_batches(client: Any, tenant: Any, db: Any) -> None:
    sid = await new_session(client)
    texts = [
        "Where did you go last summer?",
        "We went to Lisbon with my sister Ana, 3 days in total.",
        "Sounds lovely. Did you like it?",
    ]
    more = ["Yes! I loved the food at Rosa's.", "ok", "cool, and you?"]
    # one batch, then three batches of one: the first message of a batch reads the
    # session's last message (a question by the other role makes it an answer)
    await append(client, sid, texts)
    await append(client, sid, more[:1], roles=["assistant"])
    await append(client, sid, more[1:2], roles=["assistant"])
    await append(client, sid, more[2:], roles=["user"])
    roles = ["user", "assistant", "user", "assistant", "assistant", "user"]
    expected = P.priors(zip(roles, texts + more, strict=True))
    got = await stored(db, tenant.id, sid)
    assert got == as_real(expected)
    # the cross-batch answer really counted: seq 4 answers seq 3's question
    assert expected[3][0] == P.prior_of(more[0], "assistant", P.Before("user", True))
    assert expected[3][0] != P.prior_of(more[0], "assistant", None)
    assert [t for _, t in got] == [True, True, False, False, False, False]


async def test_asks_sql_agrees_with_asks(db: Any) -> None:
    samples = [
        "",
        "what?",
        "what? ",
        'really?"',
        "really?\u201d",
        "(really?)",
        "ends. ",
        "?",
        "a? b",
        "x" * 300 + "?",
        "line\n?\n",
    ]
    rows = await db.execute(
        sa.text(f"SELECT {P.ASKS_SQL} FROM unnest(CAST(:t AS text[])) AS m(text)"),
        {"t": samples},
    )
    assert [bool(r[0]) for r in rows] == [P.asks(t) for t in samples]


async def test_time_questions_and_the_prior_match_the_reference(
    client: Any, tenant: Any, db: Any
) -> None:
    sid = await new_session(client)
    texts = [t for _, t in conversation(160, seed=31)]
    # every third message says when; every fifth asks something
    texts = [
        t + (" That was yesterday." if i % 3 == 0 else "") + (" Why?" if i % 5 == 0 else "")
        for i, t in enumerate(texts)
    ]
    await append(client, sid, texts)
    qs = queries(6, seed=32)
    asked = [f"When did we {q}?" for q in qs] + [f"how long {q}" for q in qs] + qs
    await check(client, db, tenant.id, [sid], f"/v1/sessions/{sid}/search", {}, queries=asked)
    # a time question ranks the same words differently than a plain one
    plain = (
        await client.post(
            f"/v1/sessions/{sid}/search", json={"query": f"we {qs[0]}", "rerank": False}
        )
    ).json()
    when = (
        await client.post(
            f"/v1/sessions/{sid}/search", json={"query": f"When did we {qs[0]}", "rerank": False}
        )
    ).json()
    assert [r["seq"] for r in plain["results"]] != [r["seq"] for r in when["results"]]


def _migration() -> Any:
    path = (
        Path(__file__).resolve().parents[2]
        / "alembic"
        / "versions"
        / "2026_11_29_0020_message_prior.py"
    )
    spec = importlib.util.spec_from_file_location("migration_0020", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_migrations_backfill_stores_what_the_append_stores(
    client: Any, tenant: Any, db: Any
) -> None:
    sid = await new_session(client)
    texts = [t for _, t in conversation(12, seed=41)] + ["When was that? ", "Last May, in Oslo."]
    await append(client, sid, texts[:5])
    await append(client, sid, texts[5:])
    appended = await stored(db, tenant.id, sid)
    # messages stored before the migration: the columns' defaults
    await db.execute(
        sa.text(
            "UPDATE messages SET prior = 0, timed = false WHERE tenant_id = :t AND session_id = :s"
        ),
        {"t": uuid.UUID(tenant.id), "s": uuid.UUID(sid)},
    )
    await db.commit()
    assert {p for p, _ in await stored(db, tenant.id, sid)} == {0.0}
    backfill = _migration().backfill
    written = await db.run_sync(lambda s: backfill(s.connection(), batch=4))
    await db.commit()
    assert written >= len(texts)
    assert await stored(db, tenant.id, sid) == as_real(appended)
    assert appended[-1][1] is True and appended[-1][0] > appended[-2][0]

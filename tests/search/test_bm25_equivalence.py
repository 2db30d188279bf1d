"""SQL ranking (through HTTP) against the reference in Python on a fixed corpus.

Same top 10 and scores within 1e-6, for a session scope (both through the lazily
maintained search_stats and its unsummarised tail), an agent scope and a tenant scope:
the conversation-aware ranking of the default app (`rank_windowed`, window 2, weight 2)
and plain BM25 (`rank`) on an app configured with window 0 and weight 0.
"""

import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from app.main import create_app
from app.messages.prior import asks_when
from app.search.bm25 import Doc, WindowParams, rank, rank_windowed
from app.search.dates import named_dates
from app.search.speakers import author_of, named_authors
from bench.search_corpus import conversation, queries
from tests.search.support import append
from tests.support.api import new_session

QUERIES = queries(10, seed=3) + [
    "database index optimization",
    "python asyncio",
    "kafka",
    "token token token",
]


async def corpus_docs(db, tenant_id: str, session_ids: list[str]) -> list[Doc]:
    rows = await db.execute(
        sa.text("""
        SELECT m.session_id, m.seq, m.created_at, m.name, m.text, m.prior, m.timed,
               u.lexeme, u.positions
        FROM messages m LEFT JOIN LATERAL unnest(m.search_vector) u ON true
        WHERE m.tenant_id = :tid AND m.session_id = ANY(CAST(:sids AS uuid[]))
    """),
        {"tid": uuid.UUID(tenant_id), "sids": [uuid.UUID(s) for s in session_ids]},
    )
    lexemes: dict[tuple[str, int], dict[str, list[int]]] = defaultdict(dict)
    times, authors, priors = {}, {}, {}
    for sid, seq, created_at, name, text, prior, timed, lexeme, positions in rows:
        doc = lexemes[(str(sid), seq)]
        times[(str(sid), seq)] = created_at
        authors[(str(sid), seq)] = author_of(name, text)
        priors[(str(sid), seq)] = (prior, timed)
        if lexeme is not None:
            doc[lexeme] = list(positions or [])
    return [
        Doc(
            id=key,
            lexemes=lx,
            sort_key=(-key[1], key[0]),
            session=key[0],
            seq=key[1],
            created_at=times[key],
            author=authors[key],
            prior=priors[key][0],
            timed=priors[key][1],
        )
        for key, lx in lexemes.items()
    ]


def windowed(docs: list[Doc], lexemes: list[str], query: str = "") -> list:
    return rank_windowed(
        docs,
        lexemes,
        windows=WindowParams(window=2, weight=2.0),
        limit=10,
        dates=named_dates(query),
        names=named_authors(query),
        when=asks_when(query),
    )


def plain(docs: list[Doc], lexemes: list[str], query: str = "") -> list:
    return rank(docs, lexemes, limit=10)


@pytest.fixture(scope="module")
async def plain_app(settings: Any) -> AsyncIterator[Any]:
    application = create_app(
        settings.model_copy(
            update={
                "search_window": 0,
                "search_window_weight": 0.0,
                "search_prior_weight": 0.0,
                "search_when_boost": 1.0,
            }
        )
    )
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def plain_client(plain_app: Any, tenant: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=plain_app),
        base_url="http://test",
        timeout=30,
        headers={"Authorization": f"Bearer {tenant.service_key}", "X-Agent-Id": "agent-1"},
    ) as c:
        yield c


def assert_same_ranking(
    sql: list[tuple[tuple[str, int], float]], ref: list[tuple[tuple[str, int], float]]
) -> None:
    assert len(sql) == len(ref)
    for (_, s), (_, r) in zip(sql, ref, strict=True):
        assert s == pytest.approx(r, abs=1e-6)

    # Same documents in the same order; documents whose scores tie (to 1e-9) may swap,
    # since the last float bits depend on summation order.
    def groups(rows):
        out: list[set] = []
        last = None
        for doc, score in rows:
            if last is not None and abs(score - last) <= 1e-9:
                out[-1].add(doc)
            else:
                out.append({doc})
            last = score
        return out

    sql_groups, ref_groups = groups(sql), groups(ref)
    assert sql_groups[:-1] == ref_groups[:-1]
    # The last group may be cut at the top-10 boundary differently.
    if sql_groups:
        last_score = sql[-1][1]
        tied = {d for d, s in ref if abs(s - last_score) <= 1e-9}
        assert sql_groups[-1] <= tied | ref_groups[-1]


async def check(
    client,
    db,
    tenant_id,
    session_ids,
    url,
    body_extra,
    reference: Callable[[list[Doc], list[str], str], list] = windowed,
    queries: list[str] = QUERIES,
):
    docs = await corpus_docs(db, tenant_id, session_ids)
    checked = 0
    for q in queries:
        resp = await client.post(url, json={"query": q, "rerank": False, "limit": 10, **body_extra})
        assert resp.status_code == 200, resp.text
        data = resp.json()
        sql = [((r["session_id"], r["seq"]), r["bm25_score"]) for r in data["results"]]
        ref = reference(docs, data["query_lexemes"], q)
        assert_same_ranking(sql, ref)
        checked += bool(sql)
    assert checked >= len(queries) // 2  # the corpus really answers most queries


async def test_session_scope_matches_reference_through_stats_and_tail(
    client, plain_client, tenant, db
):
    sid = await new_session(client)
    convo = conversation(300, seed=5)
    # Messages without text in the middle: they are in windows but are never results.
    texts = [t for _, t in convo]
    await append(client, sid, texts[:150] + ["", "the and of"] + texts[150:] + ["", "of"])
    url = f"/v1/sessions/{sid}/search"
    await check(client, db, tenant.id, [sid], url, {})
    await check(plain_client, db, tenant.id, [sid], url, {}, plain)
    await check(client, db, tenant.id, [sid], url, {"ranking": "message"}, plain)
    stored = (
        await db.execute(
            sa.text("SELECT doc_count, through_seq FROM search_stats WHERE session_id = :s"),
            {"s": uuid.UUID(sid)},
        )
    ).one()
    assert stored.through_seq == 304 and stored.doc_count == 300
    # New messages after the stored figures: stats = stored + tail.
    await append(client, sid, [t for _, t in conversation(40, seed=6)])
    await db.rollback()
    await check(client, db, tenant.id, [sid], url, {})
    await check(plain_client, db, tenant.id, [sid], url, {}, plain)


async def test_agent_and_tenant_scopes_match_reference(client, plain_client, tenant, db):
    a1 = await new_session(client, "agent-1")
    a1b = await new_session(client, "agent-1")
    a2 = await new_session(client, "agent-2")
    for i, sid in enumerate((a1, a1b, a2)):
        await append(client, sid, [t for _, t in conversation(60, seed=20 + i)])
    await check(client, db, tenant.id, [a1, a1b], "/v1/search", {"scope": "agent"})
    await check(client, db, tenant.id, [a1, a1b, a2], "/v1/search", {"scope": "tenant"})
    await check(plain_client, db, tenant.id, [a1, a1b], "/v1/search", {"scope": "agent"}, plain)
    await check(
        client,
        db,
        tenant.id,
        [a1, a1b, a2],
        "/v1/search",
        {"scope": "tenant", "ranking": "message"},
        plain,
    )


async def test_dates_the_query_names_match_the_reference(client, tenant, db):
    """Imported history over 2023 (one message a day from 1 January); queries naming a
    day, a month, a year or nothing the corpus holds."""
    sid = await new_session(client)
    start = datetime(2023, 1, 1, 22, 30, tzinfo=UTC)  # late evening: UTC decides the day
    texts = [t for _, t in conversation(200, seed=9)]
    resp = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": t,
                    "created_at": (start + timedelta(days=i)).isoformat(),
                }
                for i, t in enumerate(texts)
            ]
        },
    )
    assert resp.status_code == 201, resp.text
    dated = [
        f"{q} {when}"
        for q in queries(6, seed=4)
        for when in ("in March 2023", "on 5 February", "2023", "in May", "on 2024-01-03")
    ]
    await check(client, db, tenant.id, [sid], f"/v1/sessions/{sid}/search", {}, queries=dated)
    data = (
        await client.post(
            f"/v1/sessions/{sid}/search", json={"query": "kafka lag in March 2023", "rerank": False}
        )
    ).json()
    assert data["query_dates"] == [{"year": 2023, "month": 3, "day": None}]


async def test_authors_the_query_names_match_the_reference(client, tenant, db):
    """A transcript ("Name: text", or the message's `name`): the messages of the author a
    query names score more, in SQL as in the reference."""
    sid = await new_session(client)
    speakers = ["Caroline", "Melanie", "Jon Snow"]
    texts = [t for _, t in conversation(150, seed=12)]
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{speakers[i % 3]}: {t}"}
        for i, t in enumerate(texts)
    ]
    messages += [
        {"role": "user", "name": "Gina", "content": t} for _, t in conversation(20, seed=13)
    ]
    resp = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
    assert resp.status_code == 201, resp.text
    named = [
        f"what did {who} say about {q}"
        for q in queries(4, seed=14)
        for who in ("Caroline", "Melanie's", "jon snow", "Gina", "nobody")
    ]
    await check(client, db, tenant.id, [sid], f"/v1/sessions/{sid}/search", {}, queries=named)
    # the same words, one message by the named author: it comes before the other
    await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "Melanie: the zeppelin tickets are booked"},
                {"role": "user", "content": "Caroline: the zeppelin tickets are booked"},
            ]
        },
    )
    for who, seq, other in (("Caroline", 172, 171), ("Melanie", 171, 172)):
        data = (
            await client.post(
                f"/v1/sessions/{sid}/search",
                json={"query": f"When did {who} book zeppelin tickets?", "rerank": False},
            )
        ).json()
        seqs = [r["seq"] for r in data["results"]]
        assert seqs.index(seq) < seqs.index(other)

"""The early-stopping top-k of the seeds (app.search.prune, `seed_candidates`) is exact: the
pruned search answers what scoring every match answers, on a generated corpus, for a
session, an agent and a tenant scope; and n(t) read from `search_terms` is the count of
the scope's messages holding the lexeme, through the stored figures and the tail."""

from __future__ import annotations

import itertools
import random
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from app.search import prune, repository
from app.search.bm25 import BM25Params, WindowParams, idf, term_score
from app.search.scope import SearchScope
from bench.search_corpus import TAIL, conversation, queries
from tests.search.support import append
from tests.support.api import new_session


def test_the_bound_holds_for_every_tf_and_length() -> None:
    rng = random.Random(1)
    for _ in range(5000):
        params = BM25Params(k1=rng.choice([0.0, 0.5, 1.2, 2.0]), b=rng.choice([0, 0.3, 0.75, 1]))
        avgdl = rng.uniform(0.5, 200)
        tf = rng.randint(1, prune.MAX_POSITIONS)
        dl = tf + rng.randint(0, 2000)
        term_idf = rng.uniform(0.01, 12)
        bound = prune.upper_bound(term_idf, avgdl, params)
        assert term_score(tf, dl, avgdl, term_idf, params) <= bound * (1 + prune.ROUNDING)


def test_the_groups_are_exactly_the_sets_that_reach_theta() -> None:
    rng = random.Random(2)
    pruned = 0
    for _ in range(2000):
        bounds = [rng.choice([0.0, rng.uniform(0.5, 10)]) for _ in range(rng.randint(1, 6))]
        theta = rng.uniform(0, sum(bounds) + 1)
        groups = prune.candidate_groups(bounds, theta)
        live = [i for i, u in enumerate(bounds) if u > 0]
        if groups is None:
            # nothing pruned: every lexeme reaches theta alone (or nothing can)
            assert (
                not live
                or theta <= 0
                or all(bounds[i] >= theta * (1 - prune.ROUNDING) for i in live)
                or sum(bounds) < theta * (1 - prune.ROUNDING)
            )
            continue
        pruned += 1
        for size in range(len(live) + 1):
            for held in itertools.combinations(live, size):
                reaches = sum(bounds[i] for i in held) >= theta * (1 - prune.ROUNDING)
                covered = any(set(g) <= set(held) for g in groups)
                assert reaches == covered, (bounds, theta, held, groups)
    assert pruned > 100


async def _doc_freqs(db: Any, tid: str, sids: list[str], lexemes: list[str]) -> dict[str, int]:
    rows = await db.execute(
        sa.text("""
        SELECT u.lexeme, count(*) FROM messages m, unnest(m.search_vector) u
        WHERE m.tenant_id = :t AND m.session_id = ANY(CAST(:s AS uuid[]))
          AND u.lexeme = ANY(CAST(:l AS text[]))
        GROUP BY u.lexeme"""),
        {"t": uuid.UUID(tid), "s": [uuid.UUID(s) for s in sids], "l": lexemes},
    )
    return dict(rows.all())


def _texts(n: int, seed: int, rare: list[str]) -> list[str]:
    """Conversation text with a few rare words sprinkled in (rare lexemes are what lets
    the bound prune)."""
    rng = random.Random(seed)
    out = []
    for _, text in conversation(n, seed=seed):
        if rng.random() < 0.08:
            text += " " + " ".join(rng.sample(rare, rng.randint(1, 2)))
        out.append(text)
    return out


async def test_pruned_seeds_equal_exhaustive_ones(
    client: Any, tenant: Any, app: Any, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    rare = rng.sample(TAIL, 12)
    sids = {
        "a1": await new_session(client, "agent-1"),
        "a1b": await new_session(client, "agent-1"),
        "a2": await new_session(client, "agent-2"),
    }
    for i, sid in enumerate(sids.values()):
        await append(client, sid, _texts(400, 40 + i, rare))
    # A small corpus: prune from the first match on, with a small probe.
    monkeypatch.setattr(repository, "PRUNE_FROM_MATCHES", 0)
    monkeypatch.setattr(repository, "PROBE_ROWS", 300)
    tid = uuid.UUID(tenant.id)
    scopes = {
        "session": (SearchScope(tid, session_id=uuid.UUID(sids["a1"])), [sids["a1"]]),
        "agent": (SearchScope(tid, agent_id="agent-1"), [sids["a1"], sids["a1b"]]),
        "tenant": (SearchScope(tid), list(sids.values())),
    }
    qs = queries(30, seed=21) + [f"{w} {rare[i % 12]}" for i, w in enumerate(queries(20, 22))]
    qs += [f"{rare[0]} {rare[1]} {rare[2]}", f"hotel flight {rare[3]}"]
    # 10 seeds of 1,200 messages: about the share the default 50 are of a big scope
    params, windows = BM25Params(), WindowParams(seeds=10)
    narrowed = 0
    for kind, (scope, in_scope) in scopes.items():
        answered = 0
        for q in qs:
            async with app.state.loom.pg.acquire() as conn, conn.transaction():
                routed = await repository.custom_plans(conn, scope)
                lexemes, stats = await repository.prepare(conn, scope, q)
                if not lexemes:
                    continue
                # n(t) from search_terms is the count over the scope's messages
                counted = await _doc_freqs(db, tenant.id, in_scope, lexemes)
                assert {t: stats.freq(t) for t in lexemes} == {
                    t: counted.get(t, 0) for t in lexemes
                }, (kind, q)
                kw: dict[str, Any] = {"windows": windows, "routed": routed}
                exhaustive = await repository.bm25_top(
                    conn, scope, lexemes, stats, params, 50, prune_seeds=False, **kw
                )
                pruned = await repository.bm25_top(conn, scope, lexemes, stats, params, 50, **kw)
                bound = repository.bm25_params(scope, lexemes, stats, params, 50)
                if await repository.seed_candidates(
                    conn, scope, stats, params, windows, routed, bound
                ):
                    narrowed += 1
            got = [(h.session_id, h.seq, round(h.score, 9)) for h in pruned]
            want = [(h.session_id, h.seq, round(h.score, 9)) for h in exhaustive]
            assert got == want, (kind, q)
            answered += bool(want)
        assert answered >= len(qs) // 2, kind
    # the bound really pruned (else this test compares the exhaustive path with itself)
    assert narrowed >= 10, narrowed


async def test_term_counts_fold_with_the_stats_and_go_with_their_session(
    client: Any, tenant: Any, app: Any, db: Any
) -> None:
    sid = await new_session(client)
    await append(client, sid, ["alpha beta", "alpha alpha gamma", "the", "beta delta"])
    scope = SearchScope(uuid.UUID(tenant.id), session_id=uuid.UUID(sid))
    async with app.state.loom.pg.acquire() as conn, conn.transaction():
        lexemes, stats = await repository.prepare(conn, scope, "alpha beta gamma omega")
    assert dict(stats.doc_freqs) == {"alpha": 2, "beta": 2, "gamma": 1, "omega": 0}
    assert idf(stats.n_docs, 2) > 0 and stats.n_docs == 3
    stored = dict(
        (
            await db.execute(
                sa.text(
                    "SELECT lexeme, docs FROM search_terms WHERE tenant_id = :t AND session_id = :s"
                ),
                {"t": uuid.UUID(tenant.id), "s": uuid.UUID(sid)},
            )
        ).all()
    )
    assert stored == {"alpha": 2, "beta": 2, "gamma": 1, "delta": 1}
    # the tail after the stored figures counts too, then folds
    await append(client, sid, ["gamma omega", "alpha"])
    await db.rollback()
    for _ in range(2):
        async with app.state.loom.pg.acquire() as conn, conn.transaction():
            _, stats = await repository.prepare(conn, scope, "alpha beta gamma omega")
        assert dict(stats.doc_freqs) == {"alpha": 3, "beta": 2, "gamma": 2, "omega": 1}
    # the rows go with their session (erasure deletes the session row last)
    await db.execute(
        sa.text("DELETE FROM sessions WHERE tenant_id = :t AND id = :s"),
        {"t": uuid.UUID(tenant.id), "s": uuid.UUID(sid)},
    )
    left = (
        await db.execute(
            sa.text("SELECT count(*) FROM search_terms WHERE tenant_id = :t AND session_id = :s"),
            {"t": uuid.UUID(tenant.id), "s": uuid.UUID(sid)},
        )
    ).scalar_one()
    await db.rollback()
    assert left == 0


async def test_a_long_backlog_is_folded_over_several_searches_and_counted_whole(
    client: Any, tenant: Any, app: Any, db: Any
) -> None:
    a = await new_session(client, "agent-1")
    b = await new_session(client, "agent-1")
    await append(client, a, [f"alpha {i}" for i in range(7)] + ["beta"])
    await append(client, b, ["alpha beta", "gamma"])
    scope = SearchScope(uuid.UUID(tenant.id), agent_id="agent-1")
    through = []
    for _ in range(4):
        async with app.state.loom.pg.acquire() as conn, conn.transaction():
            _, stats = await repository.prepare(conn, scope, "alpha beta", fold_rows=3)
        # exact whatever has been folded so far
        assert dict(stats.doc_freqs) == {"alpha": 8, "beta": 2} and stats.n_docs == 10
        await db.rollback()
        rows = await db.execute(
            sa.text("SELECT coalesce(sum(through_seq), 0) FROM search_stats WHERE tenant_id = :t"),
            {"t": uuid.UUID(tenant.id)},
        )
        through.append(int(rows.scalar_one()))
    # three messages a search (the first session's first), until all 10 are folded
    assert through == [3, 6, 9, 10]

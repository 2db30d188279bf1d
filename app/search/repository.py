"""Search SQL: query lexemes, per-scope BM25 statistics, BM25 top-k in PostgreSQL.

The ranking follows `app/search/bm25.py` exactly (a test compares them). How it stays
fast on a 10,000-message session:

* Candidates come from the GIN index (`search_vector @@ 'a' | 'b'`), restricted to the
  scope; only matching rows are read.
* Each candidate's vector is cut down once, in C, to the query's lexemes
  (`ts_filter(setweight(v, 'A', lexemes), '{a}')`), so the per-term work unnests a
  vector of one to a few lexemes instead of the whole message's (measured 1.5-2x faster
  than probing the full vector once per term). Stored vectors come from `to_tsvector`,
  so every lexeme carries positions and all weights are D; the `lexeme = ANY` filter
  keeps the result exact even if some vector carried A weights.
* Ties (equal scores) go to the newer message: `seq DESC`, then `session_id`; the
  reference gets the same order as its tie-break key.
* tf: the number of positions of each query lexeme in the cut-down vector (`unnest`
  gives one row per query lexeme present); n(t) is a window count over those rows.
* |d| is `messages.search_length`, a stored generated column (positions per row).
* N and the total length of the scope come from `search_stats` (one row per session,
  valid through `through_seq`) plus the messages appended since, which the search then
  folds back into `search_stats`. Appends pay nothing; a search reads only the tail
  appended since the previous search. Messages are append-only and a session's seqs
  commit in order (appends hold the session row lock), so "seq > through_seq" is exactly
  what is missing from the stored figures.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from app.core.pg import positional
from app.models.message import StoredMessage, message_row_sql
from app.search import prune
from app.search.bm25 import BM25Params, WindowParams
from app.search.bm25 import idf as bm25_idf
from app.search.dates import DateSpec
from app.search.query import quote_lexeme, tsquery_or
from app.search.scope import SearchScope
from app.search.speakers import AUTHOR_COLON_SQL, AUTHOR_SQL

# Fold a session's tail into search_stats as soon as a search sees one: the next searches
# then read one stored row per session (a tenant search over 1,000 small sessions would
# otherwise re-scan every session's tail, since small sessions never grow a long one).
STATS_REFRESH_ROWS = 1
# At most this many tail messages are folded by one search (all of them are counted).
FOLD_ROWS = 2000

_SESSIONS_IN_SCOPE = {
    "session": "SELECT s.id, s.last_seq FROM sessions s "
    "WHERE s.tenant_id = :tenant_id AND s.id = :session_id",
    "agent": "SELECT s.id, s.last_seq FROM sessions s "
    "WHERE s.tenant_id = :tenant_id AND s.agent_id = :agent_id AND s.erasure_id IS NULL",
    "user": "SELECT s.id, s.last_seq FROM sessions s "
    "WHERE s.tenant_id = :tenant_id AND s.user_id = :user_id AND s.erasure_id IS NULL "
    "AND (CAST(:agent_id AS text) IS NULL OR s.agent_id = :agent_id)",
    "tenant": "SELECT s.id, s.last_seq FROM sessions s "
    "WHERE s.tenant_id = :tenant_id AND s.erasure_id IS NULL",
}

# The text index's expression (migration 0011): the vector plus a position-less lexeme
# naming the session. Queries match against it so the index applies; a session search adds
# its session's lexeme to the query (`scope_tsquery`), the other scopes filter afterwards.
SCOPED_VECTOR = "(array_to_tsvector(ARRAY['s' || m.session_id::text]) || m.search_vector)"


def scope_tsquery(scope: SearchScope, lexemes: list[str]) -> str:
    """The tsquery a scope's BM25 statement matches with: the OR of the lexemes, and for a
    session search its session's lexeme too."""
    terms = tsquery_or(lexemes)
    if scope.session_id is None:
        return terms
    return f"{quote_lexeme('s' + str(scope.session_id))} & ({terms})"


_MESSAGES_IN_SCOPE = {
    # `IS TRUE`: the same filter, but not an index condition, so the planner cannot trade
    # the text index (which holds the session's lexeme) for a scan of the session's rows,
    # whatever the statistics say (`custom_plans` rules out sequential scans too). The
    # tenant stays a plain condition: it picks the tenant's partition (or Citus shard).
    "session": "m.tenant_id = :tenant_id AND (m.session_id = :session_id) IS TRUE",
    "agent": "m.tenant_id = :tenant_id AND m.session_id IN "
    "(SELECT s.id FROM sessions s WHERE s.tenant_id = :tenant_id "
    "AND s.agent_id = :agent_id AND s.erasure_id IS NULL)",
    "user": "m.tenant_id = :tenant_id AND m.session_id IN "
    "(SELECT s.id FROM sessions s WHERE s.tenant_id = :tenant_id AND s.user_id = :user_id "
    "AND s.erasure_id IS NULL AND (CAST(:agent_id AS text) IS NULL OR s.agent_id = :agent_id))",
    # sessions under erasure (tombstoned, their rows going in batches) are left out: the
    # partial index ix_sessions_tenant_erasure finds them (usually none)
    "tenant": "m.tenant_id = :tenant_id AND m.session_id NOT IN "
    "(SELECT s.id FROM sessions s WHERE s.tenant_id = :tenant_id "
    "AND s.erasure_id IS NOT NULL)",
}

# The session filter where the tables are not routed by tenant (one plain PostgreSQL): the
# tenant hidden too, since a plain `tenant_id = ...` lets the planner take the primary key's
# tenant prefix instead of the text index whenever `messages` has no statistics yet (after
# a bulk import: 43 ms instead of 10 on 10,000 messages). Same rows either way.
_SESSION_UNROUTED = "(m.tenant_id = :tenant_id AND m.session_id = :session_id) IS TRUE"

# Whether the tenant-owned tables are routed by tenant (hash partitions, or Citus), read in
# the round trip that sets the search's planner options (`custom_plans`).
_ROUTED_SQL = """
SELECT set_config('plan_cache_mode', 'auto', true), set_config('enable_seqscan', $1, true),
       set_config('jit', 'off', true),
       EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('messages'))
       OR EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')
"""

_STATS_SQL = """
WITH sess AS ({sessions}),
-- the query's lexemes (stemmed with the tenant's text search configuration)
ql AS (
    SELECT u.lexeme
    FROM tenants t, unnest(to_tsvector(CAST(t.text_search_config AS regconfig), :text)) u
    WHERE t.id = :tenant_id
),
st AS (
    SELECT sess.id AS session_id, sess.last_seq, coalesce(st.doc_count, 0) AS doc_count,
           coalesce(st.total_length, 0) AS total_length,
           coalesce(st.through_seq, 0) AS through_seq
    FROM sess
    LEFT JOIN search_stats st ON st.session_id = sess.id AND st.tenant_id = :tenant_id
),
tail AS MATERIALIZED (
    SELECT st.session_id, d.seq, d.search_length, d.search_vector,
           row_number() OVER (PARTITION BY st.session_id ORDER BY d.seq) AS rn
    FROM st CROSS JOIN LATERAL (
        SELECT m.seq, m.search_length, m.search_vector
        FROM messages m
        -- The tail is the seqs after the stored figures up to the session's last_seq.
        -- The last_seq test needs no row (a one-time filter: no scan when nothing is
        -- new), and the closed seq range steers the planner to the primary key.
        WHERE st.last_seq > st.through_seq
          AND m.session_id = st.session_id AND m.tenant_id = :tenant_id
          AND m.seq BETWEEN st.through_seq + 1 AND st.last_seq
    ) d
),
-- this search's figures: the stored ones plus the whole tail
cur AS (
    SELECT st.session_id, st.doc_count + coalesce(d.docs, 0) AS doc_count,
           st.total_length + coalesce(d.total, 0) AS total_length,
           coalesce(d.tail_rows, 0) AS tail_rows
    FROM st LEFT JOIN (
        SELECT t.session_id, count(*) FILTER (WHERE t.search_length > 0) AS docs,
               coalesce(sum(t.search_length), 0) AS total, count(*) AS tail_rows
        FROM tail t GROUP BY t.session_id
    ) d ON d.session_id = st.session_id
),
-- What this statement folds into the stored figures: each session's tail from its start,
-- at most :fold_rows messages in all (sessions in id order), so that a long backlog (an
-- import) is folded over a few searches instead of one statement that outlasts the
-- statement timeout and folds nothing.
fold AS (
    SELECT f.session_id, least(f.tail_rows, :fold_rows - f.before) AS rows
    FROM (
        SELECT c.session_id, c.tail_rows,
               coalesce(sum(c.tail_rows) OVER (ORDER BY c.session_id ROWS BETWEEN
                        UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
        FROM cur c WHERE c.tail_rows >= :refresh_rows
    ) f
    WHERE f.before < :fold_rows
),
folded AS MATERIALIZED (
    SELECT t.session_id, t.seq, t.search_length, t.search_vector
    FROM tail t JOIN fold f ON f.session_id = t.session_id AND t.rn <= f.rows
),
-- the folded messages' lexemes (unnest gives each of a message's once)
tail_terms AS MATERIALIZED (
    SELECT t.session_id, u.lexeme, count(*) AS docs
    FROM folded t, unnest(t.search_vector) u
    GROUP BY t.session_id, u.lexeme
),
-- n(t) of each query lexeme over the scope: the stored counts plus the whole tail's
stored AS (
    SELECT st2.lexeme, sum(st2.docs) AS docs FROM search_terms st2
    WHERE st2.tenant_id = :tenant_id AND st2.lexeme IN (SELECT ql.lexeme FROM ql)
      AND st2.session_id IN (SELECT st.session_id FROM st)
    GROUP BY st2.lexeme
),
tail_n AS (
    SELECT u.lexeme, count(*) AS docs FROM tail t, unnest(t.search_vector) u
    WHERE u.lexeme IN (SELECT ql.lexeme FROM ql)
    GROUP BY u.lexeme
),
freq AS (
    SELECT ql.lexeme, coalesce(s.docs, 0) + coalesce(t.docs, 0) AS n
    FROM ql LEFT JOIN stored s ON s.lexeme = ql.lexeme
    LEFT JOIN tail_n t ON t.lexeme = ql.lexeme
),
refresh AS (
    INSERT INTO search_stats (session_id, tenant_id, doc_count, total_length, through_seq,
                              updated_at)
    SELECT st.session_id, :tenant_id, st.doc_count + d.docs, st.total_length + d.total,
           d.max_seq, now()
    FROM st JOIN (
        SELECT t.session_id, count(*) FILTER (WHERE t.search_length > 0) AS docs,
               coalesce(sum(t.search_length), 0) AS total, max(t.seq) AS max_seq
        FROM folded t GROUP BY t.session_id
    ) d ON d.session_id = st.session_id
    -- One refresher per tenant at a time, and nobody waits for it: the others skip the
    -- write (their figures are exact anyway). The lock and the rows written are held to
    -- the end of the request's transaction, which may include an LLM rerank call.
    -- n(t) is read first: Citus runs the CTEs one after the other (each a subplan before
    -- the ones that read it), not in one snapshot, and would read the counts written
    -- below back with the tail added twice; referenced here, they are read before.
    WHERE (SELECT count(*) FROM freq) >= 0
      AND (SELECT pg_try_advisory_xact_lock(
               hashtext('loom:search_stats:' || CAST(:tenant_id AS text))))
    ON CONFLICT (tenant_id, session_id) DO UPDATE
        SET doc_count = excluded.doc_count, total_length = excluded.total_length,
            through_seq = excluded.through_seq, updated_at = excluded.updated_at
        WHERE search_stats.through_seq < excluded.through_seq
    RETURNING search_stats.session_id, search_stats.through_seq
),
-- The sessions' lexeme counts, folded with their figures: only for the sessions whose
-- search_stats row this statement wrote (so both stay valid through the same seq), as
-- absolute counts (stored + tail, read in this statement's snapshot) that a row folded
-- through a later seq meanwhile keeps out.
refresh_terms AS (
    INSERT INTO search_terms (tenant_id, session_id, lexeme, docs, through_seq)
    SELECT :tenant_id, tt.session_id, tt.lexeme, coalesce(old.docs, 0) + tt.docs,
           r.through_seq
    FROM refresh r
    JOIN tail_terms tt ON tt.session_id = r.session_id
    LEFT JOIN search_terms old ON old.tenant_id = :tenant_id
        AND old.session_id = tt.session_id AND old.lexeme = tt.lexeme
    ON CONFLICT (tenant_id, session_id, lexeme) DO UPDATE
        SET docs = excluded.docs, through_seq = excluded.through_seq
        WHERE search_terms.through_seq < excluded.through_seq
)
SELECT (SELECT coalesce(sum(cur.doc_count), 0)::bigint FROM cur),
       (SELECT coalesce(sum(cur.total_length), 0)::bigint FROM cur),
       (SELECT coalesce(array_agg(freq.lexeme ORDER BY freq.lexeme), '{{}}') FROM freq),
       (SELECT coalesce(array_agg(freq.n ORDER BY freq.lexeme), '{{}}') FROM freq)
"""

# The conversation-aware ranking of `app/search/bm25.py` (`rank_windowed`) in two stages.
# Stage 1 scores every message matching the query (the GIN-filtered BM25 above) and keeps
# the best {seeds} as seeds. Stage 2 reads the seeds' neighbourhoods (+/- 2 * window seqs,
# primary-key range scans, so every candidate's whole window is at hand) and sums tf (per
# lexeme) and |d| over each candidate's window, keyed by (session, seq): windows never
# cross sessions. Every candidate is within the window of a seed, so its window holds a
# query lexeme. The window size and the seed count
# are written into the text (as parameters the generic plan picked nested loops, 71 ms
# instead of 30 ms on a 10,000-message session); so is the weight, for the same reason.
_BM25_SQL = """
WITH matched AS MATERIALIZED (
    SELECT m.session_id, m.seq, CAST(m.search_length AS float8) AS dl,
           ts_filter(setweight(m.search_vector, 'A', CAST(:lexemes AS text[])), '{{a}}') AS v
    FROM messages m
    WHERE {scope}
      AND (array_to_tsvector(ARRAY['s' || m.session_id::text]) || m.search_vector)
          @@ CAST(:tsquery AS tsquery)
      AND {seed_filter}
),
seeds AS MATERIALIZED (
    SELECT mt.session_id, mt.seq, o.score FROM matched mt CROSS JOIN LATERAL (
        SELECT {own_score} AS score
        FROM unnest(mt.v) u WHERE u.lexeme = ANY(CAST(:lexemes AS text[]))
    ) o
    ORDER BY o.score DESC, mt.seq DESC, mt.session_id
    LIMIT {seeds}
),
near AS MATERIALIZED (
    -- Each seed's neighbourhood by primary-key range (ORDER BY seq LIMIT keeps the planner
    -- on the key whatever the statistics say); a row is a candidate when it is within
    -- {window} of some seed.
    SELECT s.session_id, nb.seq, min(nb.created_at) AS created_at,
           min(CAST(nb.search_length AS float8)) AS dl, min(nb.author) AS author,
           min(nb.prior) AS prior, bool_or(nb.timed) AS timed,
           bool_or(nb.seq BETWEEN s.seq - {window} AND s.seq + {window}) AS candidate,
           (array_agg(nb.v))[1] AS v
    FROM seeds s CROSS JOIN LATERAL (
        -- the author only where the query may name one (app.search.speakers)
        SELECT m.seq, m.created_at, m.search_length, m.prior, m.timed,
               ts_filter(setweight(m.search_vector, 'A', CAST(:lexemes AS text[])),
                         '{{a}}') AS v,
               CASE WHEN cardinality(CAST(:names AS text[])) > 0 THEN {author} END AS author
        FROM messages m CROSS JOIN LATERAL (SELECT {author_colon} AS colon) x
        WHERE m.tenant_id = :tenant_id AND m.session_id = s.session_id
          AND m.seq BETWEEN s.seq - {reach} AND s.seq + {reach}
        ORDER BY m.seq LIMIT {reach_rows}
    ) nb
    GROUP BY s.session_id, nb.seq
),
-- the query's lexemes with their IDF over the scope (n(t) from stored counts: `prepare`)
lex AS (
    SELECT l.lexeme, l.idf
    FROM unnest(CAST(:lexemes AS text[]), CAST(:idfs AS float8[])) l(lexeme, idf)
),
hits AS (
    SELECT nr.session_id, nr.seq, u.lexeme, CAST(cardinality(u.positions) AS float8) AS tf
    FROM near nr, unnest(nr.v) u
    WHERE u.lexeme = ANY(CAST(:lexemes AS text[]))
),
-- Window sums without sorting: every neighbour credits its tf (per lexeme) and its length
-- to the seqs within {window} of it (its own tf to itself: the own score, computed again
-- here rather than joined from `own`); candidates read their sums back. The window leans
-- back: a neighbour before the candidate (d > 0) or the candidate itself (d = 0) weighs
-- 1, one after it {after}.
spread AS (
    SELECT h.session_id, h.seq + d.d AS seq, h.lexeme,
           sum(h.tf * CASE WHEN d.d >= 0 THEN 1.0 ELSE {after} END) AS wtf,
           coalesce(sum(h.tf) FILTER (WHERE d.d = 0), 0.0) AS tf
    FROM hits h, generate_series(-{window}, {window}) d(d)
    GROUP BY h.session_id, h.seq + d.d, h.lexeme
),
spans AS (
    SELECT nr.session_id, nr.seq + d.d AS seq,
           sum(nr.dl * CASE WHEN d.d >= 0 THEN 1.0 ELSE {after} END) AS wl
    FROM near nr, generate_series(-{window}, {window}) d(d)
    GROUP BY nr.session_id, nr.seq + d.d
),
scored AS (
    SELECT c.session_id, c.seq, min(c.created_at) AS created_at, min(c.author) AS author,
           min(c.prior) AS prior, bool_or(c.timed) AS timed, min(c.dl) AS dl,
           sum(l.idf * sp.tf * (CAST(:k1 AS float8) + 1.0)
               / (sp.tf + CAST(:k1 AS float8) * (1.0 - CAST(:b AS float8)
                  + CAST(:b AS float8) * c.dl / CAST(:avgdl AS float8)))) AS own_score,
           sum(l.idf * sp.wtf * (CAST(:k1 AS float8) + 1.0)
               / (sp.wtf + CAST(:k1 AS float8) * (1.0 - CAST(:b AS float8)
                  + CAST(:b AS float8) * w.wl / ({span} * CAST(:avgdl AS float8)))))
               AS window_score
    FROM near c
    JOIN spans w ON w.session_id = c.session_id AND w.seq = c.seq
    JOIN spread sp ON sp.session_id = c.session_id AND sp.seq = c.seq
    JOIN lex l ON l.lexeme = sp.lexeme
    WHERE c.candidate AND c.dl > 0
      AND (CAST(:after AS timestamptz) IS NULL OR c.created_at >= CAST(:after AS timestamptz))
      AND (CAST(:before AS timestamptz) IS NULL OR c.created_at < CAST(:before AS timestamptz))
      AND NOT (c.seq = ANY(CAST(:exclude AS bigint[])))
      AND (CAST(:exclude_from AS bigint) IS NULL OR c.seq < CAST(:exclude_from AS bigint))
    GROUP BY c.session_id, c.seq
),
top AS (
    SELECT c.session_id, c.seq,
           (c.own_score + {weight} * c.window_score)
           * CASE WHEN EXISTS (
                 -- a date the query names (app.search.dates), at its precision, in UTC
                 SELECT 1 FROM unnest(CAST(:date_y AS int[]), CAST(:date_m AS int[]),
                                      CAST(:date_d AS int[])) q(y, m, d)
                 WHERE (q.y IS NULL OR q.y = extract(year FROM c.created_at AT TIME ZONE 'UTC'))
                   AND (q.m IS NULL OR q.m = extract(month FROM c.created_at AT TIME ZONE 'UTC'))
                   AND (q.d IS NULL OR q.d = extract(day FROM c.created_at AT TIME ZONE 'UTC')))
             THEN {date_boost} ELSE 1.0 END
           -- an author the query names (app.search.speakers)
           * CASE WHEN c.author = ANY(CAST(:names AS text[])) THEN {speaker_boost} ELSE 1.0 END
           -- the message's stored informativeness prior and its length (app.messages.prior)
           * exp({prior_weight} * (c.prior + {length_weight} * ln(1.0 + c.dl)))
           -- a time expression in the message when the query asks for a time
           * CASE WHEN CAST(:when AS boolean) AND c.timed THEN {when_boost} ELSE 1.0 END
             AS score
    FROM scored c
    ORDER BY score DESC, c.seq DESC, c.session_id
    LIMIT :limit
),
ranked AS (
    SELECT top.*, row_number() OVER (ORDER BY score DESC, seq DESC, session_id) AS rn
    FROM top
)
-- Every candidate brings its role and a text preview (all the rerank prompt needs); the
-- first :full_rows bring the whole message, so a search in BM25 order needs no second
-- query (the other columns stay NULL).
SELECT r.session_id, r.seq, r.score, m.role, left(m.text, 400) AS preview,
       r.rn <= :full_rows AS full,
       CASE WHEN r.rn <= :full_rows THEN m.content END AS content,
       CASE WHEN r.rn <= :full_rows THEN m.tool_calls END AS tool_calls,
       m.tool_use_id, m.is_error, m.name, m.token_count,
       CASE WHEN r.rn <= :full_rows THEN m.metadata END AS meta,
       m.created_at,
       CASE WHEN r.rn <= :full_rows THEN m.text END AS text
FROM ranked r CROSS JOIN LATERAL (
    -- one primary-key lookup per result (LIMIT keeps it a lookup: see `bm25_top`)
    SELECT * FROM messages m
    WHERE m.tenant_id = :tenant_id AND m.session_id = r.session_id AND m.seq = r.seq
    LIMIT 1
) m
ORDER BY r.rn
"""


@dataclass(frozen=True, slots=True)
class ScopeStats:
    """N (documents in scope) and the sum of their lengths."""

    n_docs: int
    total_length: int
    # (lexeme, n(t)) of the query's lexemes over the scope
    doc_freqs: tuple[tuple[str, int], ...] = ()

    def freq(self, lexeme: str) -> int:
        """n(t): documents of the scope holding `lexeme`."""
        return dict(self.doc_freqs).get(lexeme, 0)

    @property
    def avgdl(self) -> float:
        """Mean document length (0 for an empty scope)."""
        return self.total_length / self.n_docs if self.n_docs else 0.0


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked candidate, with what the rerank prompt needs."""

    session_id: uuid.UUID
    seq: int
    score: float
    role: str = ""
    preview: str = ""
    # The whole message (Message's attribute names), when the query was asked for it.
    row: Any = None


def _result_row(r: asyncpg.Record) -> StoredMessage:
    return StoredMessage(
        r["session_id"],
        r["seq"],
        r["role"],
        r["content"],
        r["tool_calls"],
        r["tool_use_id"],
        r["is_error"],
        r["name"],
        r["token_count"],
        r["meta"] or {},
        r["created_at"],
        r["text"],
    )


# The statements as asyncpg runs them, per scope kind: (`$n` SQL, parameter names).
_STATS = {
    kind: positional(_STATS_SQL.format(sessions=sql)) for kind, sql in _SESSIONS_IN_SCOPE.items()
}
_BM25: dict[tuple[str, WindowParams, bool], tuple[str, list[str]]] = {}
_PROBE: dict[tuple[str, int, bool], tuple[str, list[str]]] = {}


# A seed's plain BM25 score from its cut-down vector `mt.v` (IDF per lexeme as bound:
# `:idfs` follows `:lexemes`), as `app/search/bm25.py` defines it.
_OWN_SCORE = """sum((CAST(:idfs AS float8[]))[array_position(CAST(:lexemes AS text[]), u.lexeme)]
            * CAST(cardinality(u.positions) AS float8) * (CAST(:k1 AS float8) + 1.0)
            / (CAST(cardinality(u.positions) AS float8) + CAST(:k1 AS float8)
               * (1.0 - CAST(:b AS float8)
                  + CAST(:b AS float8) * mt.dl / CAST(:avgdl AS float8))))"""

# Who may be a seed besides matching: the request's time bounds and a session search's
# left-out seqs (windows and statistics still read every message of the scope).
_SEED_FILTER = """(CAST(:after AS timestamptz) IS NULL
           OR m.created_at >= CAST(:after AS timestamptz))
      AND (CAST(:before AS timestamptz) IS NULL OR m.created_at < CAST(:before AS timestamptz))
      AND NOT (m.seq = ANY(CAST(:exclude AS bigint[])))
      AND (CAST(:exclude_from AS bigint) IS NULL OR m.seq < CAST(:exclude_from AS bigint))"""

# The probe of the early-stopping top-k (`app.search.prune`): up to :probe_rows messages
# matching :tsquery (the rare lexemes, or all the lexemes together), scored like the
# seeds; the {seeds}-th best score bounds from below what the seeds will score. Any
# messages give a valid bound: the LIMIT only makes it looser.
_PROBE_SQL = """
WITH matched AS MATERIALIZED (
    SELECT m.session_id, m.seq, CAST(m.search_length AS float8) AS dl,
           ts_filter(setweight(m.search_vector, 'A', CAST(:lexemes AS text[])), '{{a}}') AS v
    FROM messages m
    WHERE {scope}
      AND (array_to_tsvector(ARRAY['s' || m.session_id::text]) || m.search_vector)
          @@ CAST(:tsquery AS tsquery)
      AND {seed_filter}
    LIMIT :probe_rows
)
SELECT o.score FROM matched mt CROSS JOIN LATERAL (
    SELECT {own_score} AS score
    FROM unnest(mt.v) u WHERE u.lexeme = ANY(CAST(:lexemes AS text[]))
) o
ORDER BY o.score DESC
LIMIT {seeds}
"""

# How many messages the probe scores at most, and when a search skips it: the matches of
# the scope (the sum of n(t)) are few enough to score them all.
PROBE_ROWS = 1000
PRUNE_FROM_MATCHES = 4000


def _scope_filter(kind: str, routed: bool) -> str:
    return _MESSAGES_IN_SCOPE[kind] if routed or kind != "session" else _SESSION_UNROUTED


def bm25_sql(kind: str, windows: WindowParams, routed: bool = True) -> str:
    """The ranking statement of a scope kind (`:name` parameters); `routed`: the tables are
    partitioned (or distributed) by tenant, so the tenant must be a plain condition."""
    return _BM25_SQL.format(
        scope=_scope_filter(kind, routed),
        seed_filter=_SEED_FILTER,
        own_score=_OWN_SCORE,
        seeds=windows.seeds,
        window=windows.window,
        reach=2 * windows.window,
        reach_rows=4 * windows.window + 1,
        span=repr(float(windows.span)),
        after=repr(float(windows.after_weight)),
        prior_weight=repr(float(windows.prior_weight)),
        when_boost=repr(float(windows.when_boost)),
        length_weight=repr(float(windows.length_weight)),
        weight=repr(float(windows.weight)),
        date_boost=repr(float(windows.date_boost)),
        speaker_boost=repr(float(windows.speaker_boost)),
        author=AUTHOR_SQL,
        author_colon=AUTHOR_COLON_SQL,
    )


def probe_sql(kind: str, windows: WindowParams, routed: bool = True) -> str:
    """The probe statement of a scope kind (`_PROBE_SQL`; `:name` parameters)."""
    return _PROBE_SQL.format(
        scope=_scope_filter(kind, routed),
        seed_filter=_SEED_FILTER,
        own_score=_OWN_SCORE,
        seeds=windows.seeds,
    )


def _bm25_statement(kind: str, windows: WindowParams, routed: bool) -> tuple[str, list[str]]:
    key = (kind, windows, routed)
    statement = _BM25.get(key)
    if statement is None:
        statement = _BM25[key] = positional(bm25_sql(kind, windows, routed))
    return statement


def _probe_statement(kind: str, windows: WindowParams, routed: bool) -> tuple[str, list[str]]:
    key = (kind, windows.seeds, routed)
    statement = _PROBE.get(key)
    if statement is None:
        statement = _PROBE[key] = positional(probe_sql(kind, windows, routed))
    return statement


def _args(statement: tuple[str, list[str]], params: dict[str, Any]) -> list[Any]:
    return [params[name] for name in statement[1]]


async def custom_plans(conn: asyncpg.Connection, scope: SearchScope) -> bool:
    """Plan the search statements for their parameters in this transaction: how selective
    a query's lexemes are decides between the text index and the agent's or tenant's rows,
    which a generic plan (the hot paths' pool default, `app.core.pg`) cannot know.

    A session search always takes the text index (its query names the session's lexeme):
    with the scan of the session's rows also possible, PostgreSQL picked it (the GIN cost
    model overrates the index), 19 ms instead of 3.4 ms on a 10,000-message session, and
    with statistics older than a bulk import it scanned the whole table. Sequential scans
    are ruled out for the transaction; the statement's scope filter is not indexable.

    No JIT for the transaction: the statistics statement's estimates (a tail that could
    be long) passed the JIT threshold at 1,000,000 messages and compiled for 96 ms of a
    213 ms statement that read no tail at all.

    Returns whether the tables are routed by tenant (see `bm25_sql`), read in the same
    round trip."""
    row = await conn.fetchrow(_ROUTED_SQL, "off" if scope.session_id is not None else "on")
    return bool(row[3])


async def hash_joins(conn: asyncpg.Connection) -> None:
    """Plan the ranking statement's joins as hash joins (for the transaction).

    The statement's intermediate results are CTEs, which PostgreSQL estimates at a row or
    two whatever they hold, so it joined them with nested loops that rescanned one CTE per
    row of the other (250 x 777 rows, 35 ms of a 54 ms search). Without nested loops the
    joins between them hash; the lookups that must be nested loops (a seed's neighbours,
    a result's row, a vector's lexemes) are LATERAL, which nothing else can execute. Those
    count as disabled nodes in the plan's cost (10^10 each), which would then pass the JIT
    threshold and spend 0.5 s compiling: no JIT."""
    await conn.execute("SET LOCAL enable_nestloop = off; SET LOCAL jit = off")


async def prepare(
    conn: asyncpg.Connection, scope: SearchScope, text: str, fold_rows: int = FOLD_ROWS
) -> tuple[list[str], ScopeStats]:
    """One round trip: the query's lexemes (stemmed, stop words removed, with the tenant's
    text search configuration: the one its messages were indexed with) and the scope's
    N / total length / n(t) of each lexeme, exact (stored figures plus the tails), folding
    up to `fold_rows` tail messages into the stored figures."""
    statement = _STATS[scope.kind]
    row = await conn.fetchrow(
        statement[0],
        *_args(
            statement,
            {
                **scope.params(),
                "refresh_rows": STATS_REFRESH_ROWS,
                "fold_rows": fold_rows,
                "text": text,
            },
        ),
    )
    n_docs, total, lexemes, freqs = row
    lexemes = list(lexemes or [])
    return lexemes, ScopeStats(
        int(n_docs), int(total), tuple(zip(lexemes, (int(n) for n in freqs or []), strict=True))
    )


def bm25_params(
    scope: SearchScope,
    lexemes: list[str],
    stats: ScopeStats,
    params: BM25Params,
    limit: int,
    full_rows: int = 0,
    after: datetime | None = None,
    before: datetime | None = None,
    exclude_seqs: Sequence[int] = (),
    dates: Sequence[DateSpec] = (),
    exclude_from: int | None = None,
    names: Sequence[str] = (),
    when: bool = False,
) -> dict[str, Any]:
    """The ranking statement's parameters by name (`bm25_sql`; see `bm25_top`)."""
    distinct = sorted(set(lexemes))
    return {
        **scope.params(),
        "lexemes": distinct,
        "tsquery": scope_tsquery(scope, distinct),
        # IDF over the scope from the stored n(t) (`prepare`), as bm25.idf computes it
        "idfs": [bm25_idf(stats.n_docs, stats.freq(t)) for t in distinct],
        "avgdl": stats.avgdl,
        "k1": params.k1,
        "b": params.b,
        "limit": limit,
        "full_rows": full_rows,
        "after": after,
        "before": before,
        "exclude": list(exclude_seqs) if scope.session_id is not None else [],
        "exclude_from": exclude_from if scope.session_id is not None else None,
        "date_y": [d.year for d in dates],
        "date_m": [d.month for d in dates],
        "date_d": [d.day for d in dates],
        "names": list(names),
        "when": when,
    }


def _scoped(scope: SearchScope, expr: str) -> str:
    if scope.session_id is None:
        return expr
    return f"{quote_lexeme('s' + str(scope.session_id))} & ({expr})"


async def seed_candidates(
    conn: asyncpg.Connection,
    scope: SearchScope,
    stats: ScopeStats,
    params: BM25Params,
    windows: WindowParams,
    routed: bool,
    bound: dict[str, Any],
) -> str | None:
    """The tsquery of the messages that can still be seeds (`app.search.prune`), or None
    when every match must be scored: a probe scores a few likely seeds (the messages of
    the rare lexemes, and some holding all of them) for a lower bound on the seeds'
    scores, and only the messages holding enough lexemes to reach it stay candidates."""
    lexemes: list[str] = bound["lexemes"]
    freqs = [stats.freq(t) for t in lexemes]
    live = [i for i, n in enumerate(freqs) if n > 0]
    if len(live) < 2 or sum(freqs) <= PRUNE_FROM_MATCHES:
        return None
    bounds = [
        prune.upper_bound(bound["idfs"][i], stats.avgdl, params) if freqs[i] > 0 else 0.0
        for i in range(len(lexemes))
    ]
    quoted = [quote_lexeme(t) for t in lexemes]
    probe = ["(" + " & ".join(quoted[i] for i in live) + ")"]
    probe += [quoted[i] for i in live if freqs[i] <= PROBE_ROWS]
    statement = _probe_statement(scope.kind, windows, routed)
    scores = await conn.fetch(
        statement[0],
        *_args(
            statement,
            {**bound, "tsquery": _scoped(scope, " | ".join(probe)), "probe_rows": PROBE_ROWS},
        ),
    )
    if len(scores) < windows.seeds:
        return None
    groups = prune.candidate_groups(bounds, float(scores[-1][0]))
    if groups is None:
        return None
    return _scoped(scope, " | ".join("(" + " & ".join(quoted[i] for i in g) + ")" for g in groups))


async def bm25_top(
    conn: asyncpg.Connection,
    scope: SearchScope,
    lexemes: list[str],
    stats: ScopeStats,
    params: BM25Params,
    limit: int,
    full_rows: int = 0,
    windows: WindowParams | None = None,
    after: datetime | None = None,
    before: datetime | None = None,
    exclude_seqs: Sequence[int] = (),
    dates: Sequence[DateSpec] = (),
    exclude_from: int | None = None,
    routed: bool = True,
    names: Sequence[str] = (),
    when: bool = False,
    prune_seeds: bool = True,
) -> list[Hit]:
    """The `limit` best messages of the scope for the OR of `lexemes` in the
    conversation-aware ranking (`windows`), best first; the first `full_rows` carry the
    whole message in `Hit.row`. `after` (inclusive) and `before` (exclusive) bound the
    results' `created_at`; windows and statistics still read the whole scope. A session
    search may leave out `exclude_seqs` and every seq from `exclude_from` on (neither
    seeds nor results; windows still read them). Messages of one of `dates` (the query's,
    `app.search.dates`) score `windows.date_boost` times more, messages whose author is
    one of `names` (`app.search.speakers`) `windows.speaker_boost` times more; every
    message by exp(`windows.prior_weight` * its stored prior), and, when the query asks
    for a time (`when`), those with a time expression `windows.when_boost` times more
    (`app.messages.prior`). The seeds are found with the early-stopping top-k of
    `seed_candidates` (`prune_seeds=False`: by scoring every match; same results)."""
    if not lexemes or stats.n_docs == 0:
        return []
    windows = windows or WindowParams()
    statement = _bm25_statement(scope.kind, windows, routed)
    bound = bm25_params(
        scope,
        lexemes,
        stats,
        params,
        limit,
        full_rows,
        after,
        before,
        exclude_seqs,
        dates,
        exclude_from,
        names,
        when,
    )
    await hash_joins(conn)
    if prune_seeds:
        narrowed = await seed_candidates(conn, scope, stats, params, windows, routed, bound)
        if narrowed is not None:
            bound["tsquery"] = narrowed
    rows = await conn.fetch(statement[0], *_args(statement, bound))
    return [
        Hit(
            r["session_id"],
            int(r["seq"]),
            float(r["score"]),
            r["role"],
            r["preview"],
            _result_row(r) if r["full"] else None,
        )
        for r in rows
    ]


# What a result shows: everything MessagePublic needs plus the text, not the tsvector (its
# text form is long and costs more to decode than the rest of the row).
_LOAD_SQL = (
    """
    SELECT """
    + message_row_sql()
    + """, text
    FROM messages
    WHERE tenant_id = $1 AND session_id = ANY($2::uuid[]) AND seq = ANY($3::bigint[])
"""
)


async def load_messages(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, keys: list[tuple[uuid.UUID, int]]
) -> dict[tuple[uuid.UUID, int], Any]:
    """Result rows by (session_id, seq), tenant-filtered; attribute names as on Message."""
    if not keys:
        return {}
    # The exact keys are picked out below (the two lists' cross product can only add
    # rows, never miss one).
    wanted = set(keys)
    rows = await conn.fetch(
        _LOAD_SQL, tenant_id, sorted({k[0] for k in keys}), sorted({k[1] for k in keys})
    )
    out = {}
    for r in rows:
        if (r["session_id"], r["seq"]) in wanted:
            out[(r["session_id"], r["seq"])] = _result_row(r)
    return out

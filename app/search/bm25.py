"""Reference BM25 (Okapi) over tsvector-shaped documents. Pure: no I/O.

This is the executable definition of the ranking that `repository.py` computes in SQL;
a test runs both over one corpus and requires the same top 10 and scores within 1e-6.

Definitions (the SQL must follow them exactly):

* A document is a message whose tsvector has at least one lexeme position
  (messages with no searchable text are not documents: they neither match nor
  count in N or avgdl).
* tf(t, d)  = number of positions of lexeme t in d's tsvector. PostgreSQL keeps at
  most 256 positions per lexeme; both sides read the same tsvector, so they agree.
  Stored vectors come from `to_tsvector`, so every lexeme has positions (`strip`ped
  vectors are not supported; here a position-less lexeme would count once).
* |d|       = total number of lexeme positions in d (stop words are not counted).
* N, avgdl  = number of documents in the search scope, mean |d| over them.
* n(t)      = number of documents in the scope containing t.
* IDF(t)    = ln(1 + (N - n + 0.5) / (n + 0.5))  (Lucene's variant: never negative,
  so a term present in most documents still adds a little instead of penalising).
* score(d)  = sum over the DISTINCT query lexemes t of
              IDF(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)).
  A query lexeme repeated in the query counts once (queries are short; repeating a
  word should not multiply its weight).
* Order: score descending, ties by the caller's tie-break key ascending.

Conversation-aware ranking (`rank_windowed`): in a conversation the answer is often
spread over neighbouring turns, or sits next to the turn that shares the query's words.
A message is scored with the text around it:

* Stage 1, seeds: the `seeds` best documents by the plain score above.
* Stage 2, candidates: every document (|d| > 0) of a seed's session whose seq is within
  `window` of a seed's (the seeds included). Windows never cross sessions.
* The window of c: the messages of c's session with |seq - seq(c)| <= window (documents
  or not; a message without text adds nothing), leaning back: the turns before c and c
  itself weigh 1, the turns after it `after_weight` (an answer follows what it answers;
  what follows a statement adds less to it). tf_w(t) = the weighted sum of tf(t) over
  it, |w| = the weighted sum of |d| over it.
* window(c) = sum over the query lexemes with tf_w > 0 of
              IDF(t) * tf_w * (k1 + 1) / (tf_w + k1 * (1 - b + b * |w| / avgwl)),
  with IDF from the whole scope as above and
  avgwl = (window + 1 + window * after_weight) * avgdl (the window's weights summed).
* score(c)  = (score(c) above (0 when c holds no query lexeme) + weight * window(c))
              * (date_boost when c's created_at, in UTC, falls on a date the query names
                 (`app.search.dates`), else 1)
              * (speaker_boost when the query names c's author (`app.search.speakers`),
                 else 1)
              * exp(prior_weight * (prior(c) + length_weight * ln(1 + |c|))) (c's stored
                informativeness prior and its length term, `app.messages.prior`)
              * (when_boost when the query asks for a time and c carries a time
                 expression (`app.messages.prior.asks_when`, `timed`), else 1).
* Order: as above. window = 0, weight = 0, prior_weight = 0 (or priors of 0) and no
  named date, author or time question give exactly the plain ranking.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.messages import prior as turn_prior
from app.search.dates import DateSpec, matches

DEFAULT_K1 = 1.2
DEFAULT_B = 0.75


@dataclass(frozen=True, slots=True)
class BM25Params:
    """Free parameters of BM25; k1 ≥ 0 saturates tf, 0 ≤ b ≤ 1 normalises length."""

    k1: float = DEFAULT_K1
    b: float = DEFAULT_B

    def __post_init__(self) -> None:
        if not (math.isfinite(self.k1) and self.k1 >= 0):
            raise ValueError("k1 must be a finite number >= 0")
        if not (math.isfinite(self.b) and 0 <= self.b <= 1):
            raise ValueError("b must be between 0 and 1")


@dataclass(frozen=True, slots=True)
class Doc:
    """One document: its id, a tie-break key and lexeme -> positions (as in a tsvector)."""

    id: Hashable
    lexemes: Mapping[str, Sequence[int]]
    sort_key: tuple = ()
    # Where the message sits in its conversation, and when (for `rank_windowed`).
    session: Hashable = None
    seq: int = 0
    created_at: datetime | None = None
    author: str | None = None  # `app.search.speakers.author_of`
    prior: float = 0.0  # `app.messages.prior.prior_of`, as stored
    timed: bool = False  # `app.messages.prior.timed`, as stored

    def on(self, dates: Sequence[DateSpec]) -> bool:
        """Whether the message's time (UTC) falls on one of `dates`."""
        if self.created_at is None:
            return False
        t = self.created_at.astimezone(UTC)
        return any(matches(spec, t.year, t.month, t.day) for spec in dates)

    @property
    def length(self) -> int:
        """|d|: total lexeme positions (a position-less lexeme counts once)."""
        return sum(max(len(p), 1) for p in self.lexemes.values())

    def tf(self, lexeme: str) -> int:
        """Positions of `lexeme` in the document, 0 when absent."""
        positions = self.lexemes.get(lexeme)
        if positions is None:
            return 0
        return max(len(positions), 1)


def idf(n_docs: int, doc_freq: int) -> float:
    """Lucene BM25 IDF: ln(1 + (N - n + 0.5) / (n + 0.5))."""
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def term_score(tf: int, doc_len: int, avgdl: float, term_idf: float, params: BM25Params) -> float:
    """Contribution of one query term to one document's score."""
    if tf <= 0:
        return 0.0
    norm = params.k1 * (1.0 - params.b + params.b * doc_len / avgdl) if avgdl > 0 else params.k1
    return term_idf * tf * (params.k1 + 1.0) / (tf + norm)


def _weighted_term(
    tf: float, doc_len: float, avgdl: float, term_idf: float, params: BM25Params
) -> float:
    """`term_score` for a weighted tf and length (a window's)."""
    if tf <= 0:
        return 0.0
    norm = params.k1 * (1.0 - params.b + params.b * doc_len / avgdl) if avgdl > 0 else params.k1
    return term_idf * tf * (params.k1 + 1.0) / (tf + norm)


def rank(
    docs: Iterable[Doc],
    query_lexemes: Iterable[str],
    params: BM25Params | None = None,
    limit: int | None = None,
) -> list[tuple[Hashable, float]]:
    """Score every document of the scope that contains a query lexeme; best first.

    `docs` is the whole search scope (it defines N, avgdl and n(t)); documents with no
    positions are ignored, as in SQL.
    """
    return [(d.id, score) for d, score in _rank_docs(list(docs), query_lexemes, params, limit)]


def _rank_docs(
    docs: list[Doc], query_lexemes: Iterable[str], params: BM25Params | None, limit: int | None
) -> list[tuple[Doc, float]]:
    params = params or BM25Params()
    scope = [d for d in docs if d.length > 0]
    terms = sorted(set(query_lexemes))
    if not scope or not terms:
        return []
    n_docs = len(scope)
    avgdl = sum(d.length for d in scope) / n_docs
    idfs = {t: idf(n_docs, sum(1 for d in scope if t in d.lexemes)) for t in terms}
    scored: list[tuple[float, tuple, Doc]] = []
    for d in scope:
        present = [t for t in terms if t in d.lexemes]
        if not present:
            continue
        dl = d.length
        score = sum(term_score(d.tf(t), dl, avgdl, idfs[t], params) for t in present)
        scored.append((score, d.sort_key, d))
    scored.sort(key=lambda row: (-row[0], row[1]))
    if limit is not None:
        scored = scored[:limit]
    return [(d, score) for score, _, d in scored]


@dataclass(frozen=True, slots=True)
class WindowParams:
    """Conversation-aware ranking: `window` turns each side, the window's `weight`, how
    many plain-BM25 `seeds` the windows are taken around, and the factors for messages of
    a date the query names and for messages whose author it names."""

    window: int = 2
    weight: float = 2.0
    seeds: int = 50
    date_boost: float = 3.0
    speaker_boost: float = 1.3
    # the weight of the turns after the candidate in its window (those before weigh 1)
    after_weight: float = 0.5
    # the informativeness prior's weight (lambda) and the boost for a time question
    prior_weight: float = turn_prior.LAMBDA
    when_boost: float = turn_prior.WHEN_BOOST
    # the prior's length term (0 for the context's automatic recall: app.messages.prior)
    length_weight: float = turn_prior.LENGTH_WEIGHT

    @property
    def span(self) -> float:
        """The window's weights summed (its length in average messages)."""
        return self.window + 1 + self.window * self.after_weight

    def __post_init__(self) -> None:
        if not (0 <= self.window <= 10):
            raise ValueError("window must be between 0 and 10")
        if not (math.isfinite(self.weight) and 0 <= self.weight <= 100):
            raise ValueError("weight must be between 0 and 100")
        if not (1 <= self.seeds <= 1000):
            raise ValueError("seeds must be between 1 and 1000")
        if not (math.isfinite(self.date_boost) and 1 <= self.date_boost <= 100):
            raise ValueError("date_boost must be between 1 and 100")
        if not (math.isfinite(self.speaker_boost) and 1 <= self.speaker_boost <= 100):
            raise ValueError("speaker_boost must be between 1 and 100")
        if not (math.isfinite(self.after_weight) and 0 <= self.after_weight <= 1):
            raise ValueError("after_weight must be between 0 and 1")
        if not (math.isfinite(self.prior_weight) and 0 <= self.prior_weight <= 1):
            raise ValueError("prior_weight must be between 0 and 1")
        if not (math.isfinite(self.when_boost) and 1 <= self.when_boost <= 100):
            raise ValueError("when_boost must be between 1 and 100")
        if not (math.isfinite(self.length_weight) and 0 <= self.length_weight <= 10):
            raise ValueError("length_weight must be between 0 and 10")


def rank_windowed(
    docs: Iterable[Doc],
    query_lexemes: Iterable[str],
    params: BM25Params | None = None,
    windows: WindowParams | None = None,
    limit: int | None = None,
    dates: Sequence[DateSpec] = (),
    names: Sequence[str] = (),
    when: bool = False,
) -> list[tuple[Hashable, float]]:
    """The conversation-aware ranking (module docstring) of every message of the scope
    (`docs` with their `session`, `seq`, `created_at`, `author`, `prior` and `timed`,
    documents or not) for the query's lexemes, the dates it names, the authors it may name
    (`app.search.speakers.named_authors`) and whether it asks for a time
    (`app.messages.prior.asks_when`); best first."""
    params = params or BM25Params()
    windows = windows or WindowParams()
    docs = list(docs)
    terms = sorted(set(query_lexemes))
    plain = _rank_docs(docs, terms, params, None)
    if not plain:
        return []
    scope = [d for d in docs if d.length > 0]
    avgdl = sum(d.length for d in scope) / len(scope)
    idfs = {t: idf(len(scope), sum(1 for d in scope if t in d.lexemes)) for t in terms}
    own = {(d.session, d.seq): score for d, score in plain}
    by_session: dict[Hashable, dict[int, Doc]] = {}
    for d in docs:
        by_session.setdefault(d.session, {})[d.seq] = d
    w = windows.window
    candidates: dict[tuple[Hashable, int], Doc] = {}
    for seed, _ in plain[: windows.seeds]:
        rows = by_session[seed.session]
        for seq in range(seed.seq - w, seed.seq + w + 1):
            near = rows.get(seq)
            if near is not None and near.length > 0:
                candidates[(near.session, near.seq)] = near
    avgwl = windows.span * avgdl
    named = set(names)
    scored: list[tuple[float, tuple, Hashable]] = []
    for key, c in candidates.items():
        rows = by_session[c.session]
        around = [
            (rows[s], 1.0 if s <= c.seq else windows.after_weight)
            for s in range(c.seq - w, c.seq + w + 1)
            if s in rows
        ]
        wl = sum(d.length * k for d, k in around)
        window_score = sum(
            _weighted_term(sum(d.tf(t) * k for d, k in around), wl, avgwl, idfs[t], params)
            for t in terms
        )
        score = own.get(key, 0.0) + windows.weight * window_score
        if dates and c.on(dates):
            score *= windows.date_boost
        if c.author is not None and c.author in named:
            score *= windows.speaker_boost
        score *= turn_prior.factor(c.prior, c.length, windows.prior_weight, windows.length_weight)
        if when and c.timed:
            score *= windows.when_boost
        scored.append((score, c.sort_key, c.id))
    scored.sort(key=lambda row: (-row[0], row[1]))
    if limit is not None:
        scored = scored[:limit]
    return [(doc_id, score) for score, _, doc_id in scored]

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
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

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
    params = params or BM25Params()
    scope = [d for d in docs if d.length > 0]
    terms = sorted(set(query_lexemes))
    if not scope or not terms:
        return []
    n_docs = len(scope)
    avgdl = sum(d.length for d in scope) / n_docs
    idfs = {t: idf(n_docs, sum(1 for d in scope if t in d.lexemes)) for t in terms}
    scored: list[tuple[float, tuple, Hashable]] = []
    for d in scope:
        present = [t for t in terms if t in d.lexemes]
        if not present:
            continue
        dl = d.length
        score = sum(term_score(d.tf(t), dl, avgdl, idfs[t], params) for t in present)
        scored.append((score, d.sort_key, d.id))
    scored.sort(key=lambda row: (-row[0], row[1]))
    if limit is not None:
        scored = scored[:limit]
    return [(doc_id, score) for score, _, doc_id in scored]

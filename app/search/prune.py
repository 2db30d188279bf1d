"""Which messages can still be among the seeds: the bounds of an exact early-stopping top-k
(MaxScore). Pure: no I/O.

The seeds of the conversation-aware ranking (`app.search.bm25.rank_windowed`, stage 1) are
the `seeds` best messages by the plain BM25 score, which is a sum over the query's lexemes
of IDF(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)); no prior, boost or
window multiplies it (those apply to stage 2's candidates, read around the seeds). So each
lexeme's part is bounded by `upper_bound`: with |d| >= tf (|d| counts tf's positions too)
the part grows with tf, and PostgreSQL keeps at most 256 positions per lexeme
(`MAX_POSITIONS`), so

    part(t) <= IDF(t) * (k1 + 1) * 256 / (256 + k1 * (1 - b) + k1 * b * 256 / avgdl).

A message holding the lexemes S scores at most the sum of their bounds. Once some messages
are scored (a probe), the `seeds`-th best score among them, theta, is at most the final
`seeds`-th best; a message whose bound is below theta scores below `seeds` messages and
cannot be a seed. So the exact seeds are among the messages holding, for some minimal set
S of the lexemes with bound(S) >= theta, all of S: `candidate_groups` lists those sets
(the tsquery `a | (b & c) | (b & d) ...`: a rare lexeme that reaches theta alone keeps all
its messages, the common ones only together), which the text index answers without
reading the messages outside them. When every single lexeme reaches theta, nothing is
pruned and the search scores every match (the exhaustive statement).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from app.search.bm25 import BM25Params

# PostgreSQL's limit of positions per lexeme in a tsvector (MAXNUMPOS): tf <= 256.
MAX_POSITIONS = 256
# Headroom for rounding: the bounds are computed in Python, the scores in SQL.
ROUNDING = 1e-9
# Queries with more distinct lexemes than this are not pruned (2^n sets to look at).
MAX_LEXEMES = 12
# More AND groups than this and the tsquery costs more than it saves: no pruning.
MAX_GROUPS = 64


def upper_bound(term_idf: float, avgdl: float, params: BM25Params) -> float:
    """The most one lexeme of IDF `term_idf` can add to a message's plain BM25 score."""
    k1, b = params.k1, params.b
    if k1 == 0 or avgdl <= 0:
        return term_idf * (k1 + 1.0)
    tf = float(MAX_POSITIONS)
    return term_idf * (k1 + 1.0) * tf / (tf + k1 * (1.0 - b) + k1 * b * tf / avgdl)


def candidate_groups(bounds: Sequence[float], theta: float) -> list[tuple[int, ...]] | None:
    """The minimal sets of lexemes (indexes into `bounds`) whose bounds sum to at least
    `theta`, i.e. a message can score `theta` only by holding all of one of them (a
    lexeme that reaches theta alone is a set of one: every message holding it stays a
    candidate); None when that prunes nothing (every lexeme reaches theta alone), or
    there are too many lexemes or sets to say."""
    live = [i for i, u in enumerate(bounds) if u > 0]
    if len(live) > MAX_LEXEMES or theta <= 0:
        return None
    need = theta * (1.0 - ROUNDING)
    if all(bounds[i] >= need for i in live):
        return None
    groups: list[tuple[int, ...]] = []
    for size in range(1, len(live) + 1):
        for group in combinations(live, size):
            total = sum(bounds[i] for i in group)
            if total < need:
                continue
            # minimal: no lexeme can be left out
            if all(total - bounds[i] < need for i in group):
                groups.append(group)
                if len(groups) > MAX_GROUPS:
                    return None
    return groups or None

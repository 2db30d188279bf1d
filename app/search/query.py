"""User query text -> safe search terms, and lexemes -> tsquery text. Pure: no I/O.

User text is never turned into tsquery syntax. The flow is:

1. `query_terms(text)` cleans any text into a short list of word candidates (plain
   words, no operators, nothing PostgreSQL could reject: no NUL, no lone surrogates,
   no control characters; capped in size).
2. The repository sends `" ".join(terms)` to `to_tsvector(config, ...)`, so the query
   is stemmed and stop-word-filtered by exactly the configuration that indexed the
   messages (`optimizing databases` -> `optim`, `databas`).
3. `tsquery_or(lexemes)` quotes those lexemes (PostgreSQL's own output) into an OR-ed
   tsquery literal used only for the GIN-indexed `@@` candidate filter.

An empty term list or a stop-word-only query gives no lexemes: the search answers an
empty result without touching the index.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

# Why these caps: a query is a few words; a pasted page of text would make the OR-query
# match most of the corpus and cost O(terms x documents). 1,000 characters / 32 terms
# keeps every query cheap; 100-character tokens are never words (PostgreSQL itself
# ignores words over 2,047 bytes with a NOTICE).
MAX_QUERY_CHARS = 1000
MAX_TERMS = 32
MAX_TERM_CHARS = 100

# Unicode categories dropped outright: controls, format chars (zero-width joiners,
# BOM), surrogates, private use, unassigned.
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


def normalize_query(text: object) -> str:
    """NFKC-normalise, drop characters PostgreSQL or the parser choke on, cap length.

    Accepts anything (non-strings give ""); never raises.
    """
    if not isinstance(text, str):
        return ""
    # Cap before normalising too, so a huge input cannot make NFKC expensive.
    text = text[: MAX_QUERY_CHARS * 4]
    # Lone surrogates cannot be encoded as UTF-8; replace before normalising.
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = unicodedata.normalize("NFKC", text)
    out = []
    for ch in text:
        if ch.isspace():
            out.append(" ")
        elif unicodedata.category(ch) not in _DROP_CATEGORIES:
            out.append(ch)
    return " ".join("".join(out).split())[:MAX_QUERY_CHARS]


def _strip_punctuation(token: str) -> str:
    """Strip leading/trailing non-alphanumerics; keep inner ones (e-mail, foo@bar.com)."""
    start, end = 0, len(token)
    while start < end and not token[start].isalnum():
        start += 1
    while end > start and not token[end - 1].isalnum():
        end -= 1
    return token[start:end]


def query_terms(text: object) -> list[str]:
    """Word candidates for `to_tsvector`: deduplicated (case-insensitive), ≤ MAX_TERMS.

    Tokens without any letter or digit (operators, quotes, emoji-only) are dropped, as
    are tokens longer than MAX_TERM_CHARS. Never raises.
    """
    seen: set[str] = set()
    terms: list[str] = []
    for raw in normalize_query(text).split(" "):
        token = _strip_punctuation(raw)
        if not token or len(token) > MAX_TERM_CHARS:
            continue
        key = token.casefold()
        if key in seen:
            continue
        seen.add(key)
        terms.append(token)
        if len(terms) >= MAX_TERMS:
            break
    return terms


def quote_lexeme(lexeme: str) -> str:
    """Quote one lexeme as a tsquery operand: backslash and quote escaped."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_or(lexemes: Iterable[str]) -> str:
    """`'a' | 'b' | ...` over distinct non-empty lexemes (sorted: stable cache keys).

    Returns "" for no lexemes; callers must not query with it.
    """
    distinct = sorted({lx for lx in lexemes if lx and "\x00" not in lx})
    return " | ".join(quote_lexeme(lx) for lx in distinct)

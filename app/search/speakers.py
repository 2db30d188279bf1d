"""Who wrote a message, and which authors a query names. Pure: no I/O.

A conversation's evidence is most often said by the person the question is about ("What
did Nate think of the ice cream he made?"): the ranking scores a message
`WindowParams.speaker_boost` times more when the query names its author.

* A message's author: its `name` when it has one, else the text before a colon within
  the first `MAX_AUTHOR_CHARS` + 1 characters of its text, when that text holds no
  newline and the colon is followed by a space, tab or line break (the transcript
  convention "Caroline: Hey Mel!"; "https://" is no author), spaces trimmed,
  lower-cased. `AUTHOR_SQL` is the same rule in PostgreSQL, without a regular expression
  (one costs ~12 us a row, several milliseconds a search).
* The authors a query names: its words (punctuation around them dropped) and runs of two
  or three consecutive words, lower-cased, with a trailing "'s" dropped.
"""

from __future__ import annotations

import re

from app.search.query import MAX_TERMS, normalize_query

MAX_AUTHOR_CHARS = 40
_AFTER_COLON = (" ", "\t", "\n", "\r")
_POSSESSIVE = re.compile(r"['\u2019]s$")
MAX_NAME_WORDS = 3
MAX_QUERY_WORDS = 2 * MAX_TERMS
_PUNCTUATION = "\"'\u2018\u2019\u201c\u201d.,;:!?()[]{}<>"

# The author of message `m` in SQL, exactly `author_of`; `x.colon` is the position of the
# first colon in the text's first MAX_AUTHOR_CHARS + 1 characters (see `AUTHOR_COLON_SQL`).
AUTHOR_COLON_SQL = f"position(':' in left(m.text, {MAX_AUTHOR_CHARS + 1}))"
AUTHOR_SQL = (
    "CASE WHEN m.name <> '' THEN lower(m.name) "
    "WHEN x.colon > 1 AND strpos(left(m.text, x.colon - 1), E'\\n') = 0 "
    "AND substr(m.text, x.colon + 1, 1) IN (' ', E'\\t', E'\\n', E'\\r') "
    "THEN lower(nullif(btrim(left(m.text, x.colon - 1), ' '), '')) END"
)


def author_of(name: str | None, text: str | None) -> str | None:
    """The author of a message with this `name` and `text` (see the module docstring)."""
    if name:
        return name.lower()
    text = text or ""
    colon = text.find(":", 0, MAX_AUTHOR_CHARS + 1)
    if colon < 1 or "\n" in text[:colon] or text[colon + 1 : colon + 2] not in _AFTER_COLON:
        return None
    return text[:colon].strip(" ").lower() or None


def named_authors(query: object) -> list[str]:
    """The author names `query` may mention: its words and word pairs and triples."""
    words = []
    for raw in normalize_query(query).split(" ")[:MAX_QUERY_WORDS]:
        word = _POSSESSIVE.sub("", raw.strip(_PUNCTUATION).lower()).strip(_PUNCTUATION)
        if word:
            words.append(word)
    out: list[str] = []
    for n in range(1, MAX_NAME_WORDS + 1):
        for i in range(len(words) - n + 1):
            phrase = " ".join(words[i : i + n])
            if phrase and phrase not in out:
                out.append(phrase)
    return out

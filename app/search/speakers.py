"""Who wrote a message, and which authors a query names. Pure: no I/O.

A conversation's evidence is most often said by the person the question is about ("What
did Nate think of the ice cream he made?"): the ranking scores a message
`WindowParams.speaker_boost` times more when the query names its author.

* A message's author: its `name` when it has one, else the words before a colon that
  starts its text (the transcript convention "Caroline: Hey Mel!", up to
  `MAX_AUTHOR_CHARS`, no newline; the colon must be followed by whitespace, so "https://"
  is no author), lower-cased. `AUTHOR_SQL` is the same rule for PostgreSQL.
* The authors a query names: its words and runs of two or three consecutive words
  (`app.search.query.query_terms`), lower-cased, with a trailing "'s" dropped.
"""

from __future__ import annotations

import re

from app.search.query import query_terms

MAX_AUTHOR_CHARS = 40
_PREFIX = re.compile(r"\s*([^:\n]{1,%d}?):\s" % MAX_AUTHOR_CHARS)
_POSSESSIVE = re.compile(r"['\u2019]s$")
MAX_NAME_WORDS = 3

# The author of message `m` in SQL (PostgreSQL's advanced regular expressions; the capture
# group is what substring returns): exactly `author_of`.
AUTHOR_SQL = (r"lower(coalesce(nullif(m.name, ''), "
              r"substring(m.text from '^\s*([^:\n]{1,%d}?):\s')))" % MAX_AUTHOR_CHARS)


def author_of(name: str | None, text: str | None) -> str | None:
    """The author of a message with this `name` and `text` (see the module docstring)."""
    if name:
        return name.lower()
    m = _PREFIX.match(text or "")
    return m.group(1).lower() if m else None


def named_authors(query: object) -> list[str]:
    """The author names `query` may mention: its words and word pairs and triples."""
    words = [_POSSESSIVE.sub("", t.lower()) for t in query_terms(query)]
    out: list[str] = []
    for n in range(1, MAX_NAME_WORDS + 1):
        for i in range(len(words) - n + 1):
            phrase = " ".join(words[i:i + n])
            if phrase and phrase not in out:
                out.append(phrase)
    return out

"""What the service can store: one definition for every way in (pure, no I/O).

A value is stored by the append, by the other write routes, and by an import, and later
served by every read route and written into an export that must import again. So each way
in checks the same rules, from here:

- **text**: no NUL character (PostgreSQL's `text` and `jsonb` cannot hold one) and no
  unpaired surrogate (a JSON `\\ud800` escape: no UTF-8 text holds one), in any string of a
  stored document, its object keys included;
- **numbers**: finite (JSON has no NaN or Infinity, though Python's parser reads them);
- **nesting**: a stored JSON document nests at most `max_stored_depth()` levels, one less
  than the request limit `LOOM_MAX_JSON_DEPTH`, because an export line wraps each stored
  document in one object and an import reads that line under the request limit;
- **positions**: a message's `seq` (and every stored seq) is at most `MAX_SEQ`, so a
  session holding it still takes appends (the column is a 64-bit integer) and every client
  reads it exactly (2^53 - 1 is the largest integer a JavaScript number holds);
- **times**: an RFC 3339 date-time with a timezone, stored in UTC (`app.core.strict`); an
  import writes the UTC form, as the API does, so an offset PostgreSQL would not parse
  (`+23:59`) is no longer a second rule.

`problem(value)` walks a document without recursion and names the first thing that breaks
a rule; the callers turn it into their own error (a 422 for a route, a refused line for an
import).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.core import jsonlimits

MAX_SEQ = 2**53 - 1

UNSUPPORTED_CHARACTERS = "unsupported_characters"
JSON_TOO_DEEP = "json_too_deep"
UNSTORABLE_VALUE = "unstorable_value"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a value cannot be stored: `code` (one of the module's codes), `reason` (a
    sentence), `loc` (the path to it inside the document)."""

    code: str
    reason: str
    loc: tuple[str | int, ...] = ()


def max_stored_depth() -> int:
    """How deep a stored JSON document may nest (containers from its top)."""
    return jsonlimits.max_depth() - 1


_NUL = "holds a NUL character, which PostgreSQL cannot store"


def text_problem(text: str) -> str | None:
    """Why a string cannot be stored, or None. (C speed, no copy for ASCII text, which
    holds no surrogate: a message's text is checked on every append.)"""
    if text.isascii():
        return _NUL if "\x00" in text else None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds an unpaired surrogate (a \\ud800-\\udfff escape), which no UTF-8 text can"
    if "\x00" in text:
        return _NUL
    return None


def problem(value: Any, limit: int | None = None) -> Problem | None:
    """The first rule `value` (a JSON document as Python reads it) breaks, or None."""
    if isinstance(value, str):  # the common case: a message's text
        reason = text_problem(value)
        return None if reason is None else Problem(UNSUPPORTED_CHARACTERS, reason)
    limit = max_stored_depth() if limit is None else limit
    # (value, its path, its depth); a container counts one level
    stack: list[tuple[Any, tuple[str | int, ...], int]] = [(value, (), 0)]
    while stack:
        item, loc, depth = stack.pop()
        if isinstance(item, str):
            reason = text_problem(item)
            if reason is not None:
                return Problem(UNSUPPORTED_CHARACTERS, reason, loc)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return Problem(UNSTORABLE_VALUE, "is not a finite number", loc)
        elif isinstance(item, dict | list):
            depth += 1
            if depth > limit:
                return Problem(JSON_TOO_DEEP, f"JSON is nested deeper than {limit} levels", loc)
            if isinstance(item, dict):
                for key, inner in item.items():
                    if isinstance(key, str):
                        reason = text_problem(key)
                        if reason is not None:  # named as it can be shown
                            shown = key.encode("utf-8", "backslashreplace").decode("utf-8")
                            return Problem(UNSUPPORTED_CHARACTERS, f"a key {reason}", (*loc, shown))
                    stack.append((inner, (*loc, key), depth))
            else:
                stack.extend((inner, (*loc, i), depth) for i, inner in enumerate(item))
    return None


def seq_problem(seq: Any) -> str | None:
    """Why a stored position cannot be one, or None."""
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_SEQ:
        return f"must be an integer from 1 to {MAX_SEQ}"
    return None

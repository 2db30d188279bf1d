"""One nesting limit for every JSON document the server parses (pure, no recursion).

Stored JSON (message content and metadata, tool inputs, memory-item payloads, session
metadata, learned artifacts, kernel schemas, shared-memory values...) is later serialised
into responses; pydantic refuses very deep values there (500), and Python's `json` parser
raises `RecursionError` on very deep input. So the depth of every JSON document the server
parses is checked on the raw text *before* it is parsed: request bodies (the request-limits
middleware, `app.core.limits`), the `X-Loom-Metadata` header, and OpenAI
`tool_calls[].function.arguments` strings. Depth counts containers from the top of the
document (`1`, `"a"` = 0; `[]`, `{}` = 1; `{"a": []}` = 2); for a request body, from the top
of the body. The limit is `LOOM_MAX_JSON_DEPTH` (default 64), set once by `create_app`.
"""

import json
import re
from array import array
from itertools import accumulate
from typing import Any

DEFAULT_MAX_DEPTH = 64
_max_depth = DEFAULT_MAX_DEPTH

# A JSON string (once escapes are gone), or one structural character.
_TOKEN = re.compile(rb'"[^"]*"|[\[\]{},:]')
# Keep only brackets, mapped to +1 (open) and -1 (close) as signed bytes.
_BRACKETS = b"[]{}"
_DELETE = bytes(b for b in range(256) if b not in _BRACKETS)
_TABLE = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_LOC_ITEMS = 12  # how much of the path an error shows
# every byte to "0" for a digit, " " otherwise (`long_integer_possible`)
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG = 19
_RUN = b"0" * _LONG


def long_integer_possible(raw: bytes) -> bool:
    """Whether a JSON text may hold an integer beyond 64 bits (which orjson, unlike the
    standard library, reads as a float): any such integer has a run of 19 digits or more.
    Mapping bytes and looking for the run costs a third of the stdlib's decoding time,
    where a regular expression takes several times it; a text shorter than the run
    (`{}`, `[]`: most configs and metadata) is not mapped at all."""
    return len(raw) >= _LONG and _RUN in raw.translate(_DIGITS)


class JsonTooDeep(ValueError):
    """The document nests deeper than the limit; `loc` is the path to where it does."""

    def __init__(self, limit: int, loc: list[str | int]) -> None:
        shown = ".".join(str(p) for p in loc[:_LOC_ITEMS]) + (
            "..." if len(loc) > _LOC_ITEMS else ""
        )
        super().__init__(
            f"JSON is nested deeper than {limit} levels" + (f" (at {shown})" if loc else "") + "."
        )
        self.limit = limit
        self.loc = loc[:_LOC_ITEMS]

    def detail(self, prefix: list[str | int] | tuple[str | int, ...] = ()) -> dict[str, Any]:
        """One item for an error envelope's `details` list."""
        return {"loc": [*prefix, *self.loc], "msg": str(self), "type": "json_too_deep"}


def configure(max_depth: int) -> None:
    global _max_depth
    _max_depth = max_depth


def max_depth() -> int:
    return _max_depth


def _as_bytes(text: str | bytes | bytearray) -> bytes:
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)


def _unescaped(data: bytes) -> bytes:
    """The text without escape pairs: `\\\\` first, then every remaining `\\"` is an escaped
    quote, so each `"` left delimits a string."""
    return data.replace(b"\\\\", b"").replace(b'\\"', b"")


def _outside_strings(data: bytes) -> bytes:
    return b"".join(_unescaped(data).split(b'"')[::2])


def text_depth(text: str | bytes | bytearray) -> int:
    """The nesting depth of a JSON text (strings skipped), computed at C speed."""
    data = _as_bytes(text)
    if data.count(b"[") + data.count(b"{") == 0:
        return 0
    brackets = _outside_strings(data).translate(_TABLE, _DELETE)
    return max(0, max(accumulate(array("b", brackets)), default=0))


def _path_at_depth(data: bytes, limit: int) -> list[str | int]:
    """The keys/indexes leading to the first container deeper than `limit`."""
    # frames: [kind, key or index, expecting a key]
    stack: list[list[Any]] = []
    for m in _TOKEN.finditer(_unescaped(data)):
        tok = m.group()
        c = tok[:1]
        if c in (b"{", b"["):
            if len(stack) >= limit:
                return [f[1] for f in stack if f[1] is not None]
            stack.append([c, 0 if c == b"[" else None, c == b"{"])
        elif c in (b"}", b"]"):
            if stack:
                stack.pop()
        elif c == b",":
            if stack:
                if stack[-1][0] == b"[":
                    stack[-1][1] += 1
                else:
                    stack[-1][2] = True
        elif c == b":":
            if stack:
                stack[-1][2] = False
        elif stack and stack[-1][0] == b"{" and stack[-1][2]:
            stack[-1][1] = tok[1:-1].decode("utf-8", "replace")
    return []


def check_text(text: str | bytes | bytearray, limit: int | None = None) -> None:
    """Raise `JsonTooDeep` when the JSON text nests deeper than the limit."""
    limit = _max_depth if limit is None else limit
    data = _as_bytes(text)
    if data.count(b"[") + data.count(b"{") <= limit:
        return  # cannot nest deeper than the number of openers
    if text_depth(data) > limit:
        raise JsonTooDeep(limit, _path_at_depth(data, limit))


def loads(text: str | bytes | bytearray, limit: int | None = None, **kwargs: Any) -> Any:
    """`json.loads` after the depth check; never raises `RecursionError`."""
    check_text(text, limit)
    try:
        return json.loads(text, **kwargs)
    except RecursionError as exc:  # only for limits above what the parser can take
        raise JsonTooDeep(_max_depth if limit is None else limit, []) from exc

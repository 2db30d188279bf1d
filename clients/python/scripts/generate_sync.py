"""Generate the synchronous client (`loom_client/_sync/`) from the asynchronous one
(`loom_client/_async/`), as httpcore does: the same code with `async`/`await` taken out and
the async names replaced by their sync counterparts. Continuation lines aligned under a
bracket are moved left by what the line of the bracket lost, so the output stays aligned.

    python clients/python/scripts/generate_sync.py          # write loom_client/_sync/
    python clients/python/scripts/generate_sync.py --check  # exit 1 when it is stale
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "loom_client"
SOURCE, TARGET = PACKAGE / "_async", PACKAGE / "_sync"
HEADER = "# Generated from loom_client/_async/{name} by scripts/generate_sync.py: do not edit.\n"

SUBS = [(re.compile(pattern), replacement) for pattern, replacement in [
    (r"\bloom_client\._async\b", "loom_client._sync"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\basync def\b", "def"),
    (r"\basync for\b", "for"),
    (r"\basync with\b", "with"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\b__anext__\b", "__next__"),
    (r"\baclose\b", "close"),
    (r"\baread\b", "read"),
    (r"\baiter_lines\b", "iter_lines"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    (r"\basynchronous\b", "synchronous"),
    (r"\basync (?=[a-z])", ""),  # prose: "an async iterator", "the async client's"
]]
OPEN, CLOSE = "([{", ")]}"


def transform(text: str) -> str:
    for pattern, replacement in SUBS:
        text = pattern.sub(replacement, text)
    return text


def _import_key(name: str) -> tuple[int, str]:
    """isort's order within a `from` import (ruff's default): CONSTANTS, Classes, others."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name


def sort_imports(source: str) -> str:
    """Re-sort the names of `from x import ...` statements (renaming can unsort them)."""

    def one_line(match: re.Match[str]) -> str:
        names = sorted(match.group(2).split(", "), key=_import_key)
        return f"{match.group(1)}{', '.join(names)}\n"

    def block(match: re.Match[str]) -> str:
        names = sorted(re.findall(r"^\s+(\w+),$", match.group(2), re.M), key=_import_key)
        return match.group(1) + "".join(f"    {n},\n" for n in names) + ")"

    source = re.sub(r"^(from [\w.]+ import )([\w, ]+)\n", one_line, source, flags=re.M)
    return re.sub(r"^(from [\w.]+ import \(\n)((?:\s+\w+,\n)+)\)", block, source, flags=re.M)


def _brackets(source: str) -> dict[int, list[tuple[int, str]]]:
    """Line number (1-based) -> (column, bracket) of the brackets of the code."""
    out: dict[int, list[tuple[int, str]]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.OP and tok.string in OPEN + CLOSE:
            out.setdefault(tok.start[0], []).append((tok.start[1], tok.string))
    return out


def convert(source: str) -> str:
    lines = source.splitlines(keepends=True)
    brackets = _brackets(source)
    shifts: list[int] = []  # per open bracket: how far left its column moved
    out: list[str] = []
    for number, line in enumerate(lines, start=1):
        new = transform(line)
        shift = shifts[-1] if shifts else 0
        if shift and new.startswith(" " * shift) and new.strip():
            new = new[shift:]
        for column, bracket in brackets.get(number, []):
            if bracket in OPEN:
                shifts.append(shift + column - len(transform(line[:column])))
            elif shifts:
                shifts.pop()
        out.append(new)
    # an async generator cannot `yield from`; a sync one should
    text = re.sub(r"^( *)for (\w+) in (.+):\n +yield \2\n", r"\1yield from \3\n",
                  "".join(out), flags=re.M)
    return sort_imports(text)


def generate() -> dict[Path, str]:
    files = {}
    for path in sorted(SOURCE.glob("*.py")):
        files[TARGET / path.name] = HEADER.format(name=path.name) + convert(path.read_text())
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    args = parser.parse_args()
    files = generate()
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    extra = [p for p in TARGET.glob("*.py") if p not in files]
    if args.check:
        for path in stale + extra:
            print(f"stale: {path}", file=sys.stderr)
        return 1 if stale or extra else 0
    TARGET.mkdir(exist_ok=True)
    for path in stale:
        path.write_text(files[path])
        print(f"wrote {path}")
    for path in extra:
        path.unlink()
        print(f"removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Plain-text rendering of memory items and learned artifacts (pure, no I/O).

An item's ``token_cost`` is the token count of exactly the line ``item_line``
renders, so a knowledge block made of these lines costs (almost exactly) the
sum of its items' costs; the block provider still re-counts the final text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any


def dumps(value: Any) -> str:
    """Compact, stable JSON (sorted keys) used in rendered text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def item_body(text: str | None, payload: Any) -> str:
    """The item's content: its text, its payload as JSON, or both on two lines."""
    parts = [p for p in (text, None if payload is None else dumps(payload)) if p]
    return "\n".join(parts)


def item_line(kind: str, text: str | None, payload: Any) -> str:
    """One item as it appears in a knowledge block."""
    return f"- ({kind}) {item_body(text, payload)}"


def knowledge_block(header: str, lines: Sequence[str]) -> str:
    """A knowledge block: a header line, then one line per item."""
    return "\n".join([header, *lines])


def fit_lines(
    header: str, lines: list[str], budget: int, count: Callable[[str], int]
) -> str | None:
    """Drop trailing lines until ``header + lines`` costs at most ``budget`` tokens.

    Lines are in priority order, so the least important go first. None when not
    even one line fits (an empty block is not worth its header).
    """
    while lines:
        text = knowledge_block(header, lines)
        if count(text) <= budget:
            return text
        lines = lines[:-1]
    return None


def learned_block(
    version: int, content: dict[str, Any], budget: int, count: Callable[[str], int]
) -> str | None:
    """Render an active learned version within ``budget`` tokens.

    Tuned prompts and signatures are kept whole; demonstrations are dropped
    from the end until the text fits. None if it cannot fit at all.
    """
    demos = list(content.get("demonstrations") or [])
    while True:
        text = _learned_text(version, content, demos)
        if count(text) <= budget:
            return text
        if not demos:
            return None
        demos.pop()


def _learned_text(version: int, content: dict[str, Any], demos: list[Any]) -> str:
    out = [f"Learned optimizations (version {version}):"]
    prompts = content.get("tuned_prompts") or {}
    if prompts:
        out.append("Tuned prompts:")
        out += [
            f"- {name}: {text if isinstance(text, str) else dumps(text)}"
            for name, text in prompts.items()
        ]
    sigs = content.get("signatures") or {}
    if sigs:
        out.append("Signatures:")
        out += [f"- {name}: {dumps(sig)}" for name, sig in sigs.items()]
    if demos:
        out.append("Demonstrations:")
        out += [f"- {dumps(d)}" for d in demos]
    return "\n".join(out)

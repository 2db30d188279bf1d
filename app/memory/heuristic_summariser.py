"""Deterministic heuristic summariser: fast, no network, always available.

It stands in for the LLM summary while a job is pending, and replaces it when the LLM
fails or is not configured (``method: heuristic``). A summary keeps the first 500
characters of the user text it covers (Python ``str`` slicing cuts on code points, so
never inside a UTF-8 sequence), says what the assistant and the tools did, and names
its range (``covers msg:a-b``) so an agent can recall the exact messages.

Messages are canonical dicts: ``seq``, ``role``, ``content`` (a string or a list of
Anthropic-style blocks), optional ``tool_calls`` (``[{id, name, input}]``) and, for
results, ``tool_call_id`` / ``tool_result`` blocks. Unknown shapes degrade to text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.tokens import count_text

USER_TEXT_CHARS = 500
ASSISTANT_TEXT_CHARS = 160
TOOL_TEXT_CHARS = 80


@dataclass(frozen=True)
class SummaryDraft:
    """A summary not yet stored: the seq range it covers and how it was made."""

    start_seq: int
    end_seq: int
    text: str
    method: str
    token_count: int


def count_tokens(text: str) -> int:
    """Tokens of a summary as it is stored and rendered (text + message overhead)."""
    return count_text(text) + 4


def covers_label(start_seq: int, end_seq: int) -> str:
    """The range marker every summary carries."""
    return f"covers msg:{start_seq}-{end_seq}"


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, Sequence):
        out: list[Mapping[str, Any]] = []
        for block in content:
            if isinstance(block, Mapping):
                out.append(block)
            elif isinstance(block, str):
                out.append({"type": "text", "text": block})
        return out
    return [{"type": "text", "text": str(content)}]


def _text_of(block: Mapping[str, Any]) -> str:
    value = block.get("text")
    if isinstance(value, str):
        return value
    inner = block.get("content")
    if isinstance(inner, str):
        return inner
    if isinstance(inner, Sequence):
        return " ".join(_text_of(b) for b in inner if isinstance(b, Mapping))
    return ""


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def _tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    calls = [b for b in _blocks(message.get("content")) if b.get("type") == "tool_use"]
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping):
            fn = call.get("function")
            calls.append(fn if isinstance(fn, Mapping) and "name" in fn else call)
    return calls


def _tool_results(message: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(text, is_error) per tool result the message carries."""
    results = [
        (_text_of(b), bool(b.get("is_error")))
        for b in _blocks(message.get("content"))
        if b.get("type") == "tool_result"
    ]
    if message.get("role") == "tool" and not results:
        text = " ".join(_text_of(b) for b in _blocks(message.get("content")))
        results.append((text, bool(message.get("is_error"))))
    return results


def _plain_text(message: Mapping[str, Any]) -> str:
    parts = [
        _text_of(b) for b in _blocks(message.get("content")) if b.get("type", "text") == "text"
    ]
    return "\n".join(p for p in parts if p)


def heuristic_summary(messages: Sequence[Mapping[str, Any]]) -> SummaryDraft:
    """Summarise consecutive messages deterministically (``method="heuristic"``)."""
    if not messages:
        raise ValueError("heuristic_summary needs at least one message")
    seqs = [int(m["seq"]) for m in messages]
    start, end = min(seqs), max(seqs)

    user_texts: list[str] = []
    replies: list[str] = []
    tools: dict[str, int] = {}
    results, errors = 0, 0
    for message in messages:
        role = message.get("role")
        if role == "user" or role == "system":
            text = _plain_text(message)
            if text and role == "user":
                user_texts.append(text)
        elif role == "assistant":
            text = _plain_text(message)
            if text:
                replies.append(text)
            for call in _tool_calls(message):
                name = str(call.get("name") or "tool")
                tools[name] = tools.get(name, 0) + 1
        for _text, is_error in _tool_results(message):
            results += 1
            errors += int(is_error)

    lines = [f"[Earlier conversation, {covers_label(start, end)}, {len(messages)} messages]"]
    if user_texts:
        joined = "\n".join(user_texts)
        kept = joined[:USER_TEXT_CHARS]
        more = " […]" if len(joined) > USER_TEXT_CHARS else ""
        lines.append(f"User said: {kept}{more}")
    if replies:
        first = _one_line(replies[0], ASSISTANT_TEXT_CHARS)
        extra = f" (+{len(replies) - 1} more replies)" if len(replies) > 1 else ""
        lines.append(f"Assistant replied: {first}{extra}")
    if tools:
        called = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(tools.items()))
        lines.append(f"Assistant called tools: {called}.")
    if results:
        lines.append(f"Tools returned {results} result(s), {errors} error(s).")
    text = "\n".join(lines)
    return SummaryDraft(
        start_seq=start,
        end_seq=end,
        text=text,
        method="heuristic",
        token_count=count_tokens(text),
    )

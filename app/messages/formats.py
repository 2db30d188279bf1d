"""Render canonical messages (dicts with role/content/tool_calls/tool_use_id/is_error) in
the Anthropic or OpenAI chat shape (pure)."""

import json
from typing import Any


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _as_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(json.dumps(block, separators=(",", ":")))
    return "\n".join(parts)


def to_anthropic(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Anthropic `messages` plus any system texts found among them.

    Tool results become `tool_result` blocks in a user message; consecutive messages of the
    same role are merged, since the Messages API expects alternating turns.
    """
    out: list[dict[str, Any]] = []
    system: list[str] = []
    for m in messages:
        role = m["role"]
        if role == "system":
            system.append(_as_text(m.get("content")))
            continue
        if role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m["tool_use_id"],
                "content": _as_blocks(m.get("content")),
            }
            if m.get("is_error"):
                block["is_error"] = True
            api_role, blocks = "user", [block]
        elif role == "assistant":
            api_role = "assistant"
            blocks = _as_blocks(m.get("content"))
            for call in m.get("tool_calls") or ():
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["name"],
                        "input": call.get("input", {}),
                    }
                )
        else:
            api_role, blocks = "user", _as_blocks(m.get("content"))
        if not blocks:
            blocks = [{"type": "text", "text": "(empty)"}]
        if out and out[-1]["role"] == api_role:
            prev = out[-1]["content"]
            # tool_result blocks must lead a user turn
            if api_role == "user" and blocks[0]["type"] == "tool_result":
                tr = [b for b in prev if b.get("type") == "tool_result"]
                other = [b for b in prev if b.get("type") != "tool_result"]
                out[-1]["content"] = tr + blocks + other
            else:
                prev.extend(blocks)
        else:
            out.append({"role": api_role, "content": blocks})
    return out, system


def to_openai(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat-completions messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": m["tool_use_id"],
                    "content": _as_text(m.get("content")),
                }
            )
        elif role == "assistant":
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": _as_text(m.get("content")) or None,
            }
            calls = m.get("tool_calls") or []
            if calls:
                msg["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": json.dumps(c.get("input", {})),
                        },
                    }
                    for c in calls
                ]
            out.append(msg)
        else:
            out.append({"role": role, "content": _as_text(m.get("content"))})
    return out

"""ROM and Kernel documents: rendering, token counts and the schema LRU (pure).

ROM (frozen at session creation): ``{"profile_version", "system_prompt", "patterns",
"backend_schema"}``. Kernel: ``{"tools": [anthropic tool defs], "schemas": [{"name",
"schema"}] most recent first (LRU, at most 10), "large_result_ref": {...} | None}``.
"""

from __future__ import annotations

import json
from typing import Any

from app.core.tokens import count_text

SCHEMA_CACHE_SIZE = 10


def _dump(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rom_text(rom: dict[str, Any]) -> str:
    """The ROM as one system text (prompt, patterns, backend schema)."""
    parts = [str(rom.get("system_prompt") or "")]
    patterns = rom.get("patterns") or []
    if patterns:
        parts.append("## Patterns\n" + "\n".join(f"- {_dump(p)}" for p in patterns))
    if rom.get("backend_schema") not in (None, "", {}, []):
        parts.append("## Backend schema\n" + _dump(rom["backend_schema"]))
    return "\n\n".join(p for p in parts if p)


def kernel_text(kernel: dict[str, Any]) -> str:
    """The Kernel's system text: cached schemas and the latest large tool result ref."""
    parts: list[str] = []
    schemas = kernel.get("schemas") or []
    if schemas:
        parts.append(
            "## Cached schemas\n"
            + "\n".join(f"### {s['name']}\n{_dump(s['schema'])}" for s in schemas)
        )
    ref = kernel.get("large_result_ref")
    if ref:
        parts.append("## Latest large tool result (fetch by reference)\n" + _dump(ref))
    return "\n\n".join(parts)


def kernel_tokens(kernel: dict[str, Any]) -> int:
    """Tokens of the Kernel as sent: its text plus the serialised tool definitions."""
    tools = kernel.get("tools") or []
    return count_text(kernel_text(kernel)) + (count_text(_dump(tools)) if tools else 0)


def put_schema(
    kernel: dict[str, Any], name: str, schema: Any, size: int = SCHEMA_CACHE_SIZE
) -> tuple[dict[str, Any], list[str]]:
    """Insert or refresh ``name`` as most recent; evict least recent past ``size``."""
    rest = [s for s in kernel.get("schemas") or [] if s["name"] != name]
    schemas = [{"name": name, "schema": schema}, *rest]
    evicted = [s["name"] for s in schemas[size:]]
    return {**kernel, "schemas": schemas[:size]}, evicted


def touch_schema(kernel: dict[str, Any], name: str) -> tuple[dict[str, Any], Any] | None:
    """Read ``name`` and make it most recent; None when it is not cached."""
    schemas = kernel.get("schemas") or []
    hit = next((s for s in schemas if s["name"] == name), None)
    if hit is None:
        return None
    others = [s for s in schemas if s["name"] != name]
    return {**kernel, "schemas": [hit, *others]}, hit["schema"]


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic tool definitions as OpenAI function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]

"""Message shapes: Anthropic and OpenAI input to one canonical form, and back (pure).

Canonical message: `role` in system|user|assistant|tool; `content` a string or a list of
non-tool blocks; `tool_calls` a list of `{id, name, input}` on assistant messages; a tool
result is its own `tool` message with `tool_use_id` (and `is_error`). An Anthropic user
message carrying N tool_result blocks becomes N tool messages (then a user message for any
other blocks), which is also the OpenAI shape; both output formats are rebuilt from it.
`created_at` is ours in either shape; the append gives it to every canonical message of the
input message.
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import jsonlimits, storable
from app.core.tokens import content_text, count_message, text_and_count, tool_calls_text


class MessageShapeError(ValueError):
    """The input is not a message we can store; `loc` points at the offending field."""

    def __init__(self, msg: str, loc: list[str | int], kind: str = "message_shape") -> None:
        super().__init__(msg)
        self.loc = loc
        self.kind = kind


@dataclass
class CanonicalMessage:
    role: str
    content: Any
    tool_calls: list[dict[str, Any]] | None = None
    tool_use_id: str | None = None
    is_error: bool = False
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None  # None: the time of the append

    @property
    def text(self) -> str:
        """Searchable text: content, then tool names and inputs."""
        parts = [content_text(self.content), tool_calls_text(self.tool_calls)]
        return "\n".join(p for p in parts if p)

    def token_count(self) -> int:
        return count_message(self.role, self.content, self.tool_calls)

    def text_and_tokens(self) -> tuple[str, int]:
        """`text` and `token_count()` together, each part serialised once."""
        return text_and_count(self.content, self.tool_calls)


def _blocks(content: Any, loc: list[str | int]) -> list[dict[str, Any]] | str | None:
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise MessageShapeError("content must be a string or a list of blocks", loc)
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise MessageShapeError("each content block must be an object with a type", [*loc, i])
    return content


def _tool_call_from_openai(call: Any, loc: list[str | int]) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise MessageShapeError("a tool call must be an object", loc)
    if "function" in call:
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise MessageShapeError("tool call function needs a name", [*loc, "function"])
        args = fn.get("arguments", "{}")
        if isinstance(args, str):
            try:
                parsed = jsonlimits.loads(args) if args.strip() else {}
            except jsonlimits.JsonTooDeep as exc:
                raise MessageShapeError(
                    str(exc), [*loc, "function", "arguments", *exc.loc], "json_too_deep"
                ) from exc
            except ValueError as exc:
                raise MessageShapeError(
                    "tool call arguments must be JSON", [*loc, "function", "arguments"]
                ) from exc
        else:
            parsed = args
        call_id, name, tool_input = call.get("id"), fn["name"], parsed
    else:
        call_id, name, tool_input = call.get("id"), call.get("name"), call.get("input", {})
        if not isinstance(name, str) or not name:
            raise MessageShapeError("a tool call needs a name", [*loc, "name"])
    if not isinstance(call_id, str) or not call_id:
        raise MessageShapeError("a tool call needs an id", [*loc, "id"])
    if not isinstance(tool_input, dict):
        raise MessageShapeError("tool input must be a JSON object", loc)
    return {"id": call_id, "name": name, "input": tool_input}


def canonicalise(raw: dict[str, Any], index: int) -> list[CanonicalMessage]:
    """One input message (either shape) to one or more canonical messages, each storable
    as it will be stored (`app.core.storable`: the append and an import check the same)."""
    out = _shaped(raw, index)
    for m in out:
        _check_storable(m, index)
    return out


def _check_storable(m: CanonicalMessage, index: int) -> None:
    for name, value in (
        ("content", m.content),
        ("tool_calls", m.tool_calls),
        ("metadata", m.metadata),
        ("name", m.name),
        ("tool_use_id", m.tool_use_id),
    ):
        if value is None:
            continue
        found = storable.problem(value)
        if found is not None:
            loc: list[str | int] = ["body", "messages", index, name, *found.loc]
            where = ".".join(str(p) for p in loc[3:])
            raise MessageShapeError(f"Message {index}, {where}: {found.reason}.", loc, found.code)


def _shaped(raw: dict[str, Any], index: int) -> list[CanonicalMessage]:
    loc: list[str | int] = ["body", "messages", index]
    role = raw.get("role")
    meta = raw.get("metadata") or {}
    name = raw.get("name")
    content = _blocks(raw.get("content"), [*loc, "content"])
    if role == "tool":
        tool_use_id = raw.get("tool_call_id") or raw.get("tool_use_id")
        if not isinstance(tool_use_id, str) or not tool_use_id:
            raise MessageShapeError("a tool message needs tool_call_id", [*loc, "tool_call_id"])
        return [
            CanonicalMessage(
                "tool",
                content,
                tool_use_id=tool_use_id,
                is_error=bool(raw.get("is_error", False)),
                name=name,
                metadata=meta,
            )
        ]
    if role == "assistant":
        calls = [
            _tool_call_from_openai(c, [*loc, "tool_calls", i])
            for i, c in enumerate(raw.get("tool_calls") or [])
        ]
        if isinstance(content, list):
            kept = []
            for i, block in enumerate(content):
                if block["type"] == "tool_use":
                    calls.append(_tool_call_from_openai(block, [*loc, "content", i]))
                else:
                    kept.append(block)
            content = kept
        ids = [c["id"] for c in calls]
        if len(ids) != len(set(ids)):
            raise MessageShapeError("tool call ids must be unique", [*loc, "tool_calls"])
        return [
            CanonicalMessage(
                "assistant", content, tool_calls=calls or None, name=name, metadata=meta
            )
        ]
    if role in ("user", "system"):
        if role == "user" and isinstance(content, list):
            out: list[CanonicalMessage] = []
            rest = []
            for i, block in enumerate(content):
                if block["type"] == "tool_result":
                    tid = block.get("tool_use_id")
                    if not isinstance(tid, str) or not tid:
                        raise MessageShapeError(
                            "a tool_result block needs tool_use_id", [*loc, "content", i]
                        )
                    out.append(
                        CanonicalMessage(
                            "tool",
                            _blocks(block.get("content"), [*loc, "content", i, "content"]),
                            tool_use_id=tid,
                            is_error=bool(block.get("is_error", False)),
                            metadata=meta,
                        )
                    )
                else:
                    rest.append(block)
            if out:
                if rest:
                    out.append(CanonicalMessage("user", rest, name=name, metadata=meta))
                return out
        return [CanonicalMessage(role, content, name=name, metadata=meta)]
    raise MessageShapeError("role must be one of system, user, assistant, tool", [*loc, "role"])

"""LLM summaries of message ranges, with the heuristic summary as the safety net.

`summarise(client, messages)` never raises for LLM trouble: no client, an `LLMError`
(HTTP error, timeout, empty or malformed answer) or an answer that cannot be used gives
`heuristic_summary(messages)` (`method="heuristic"`) and one log line naming the range
and the reason (never a key). A job that prefers to retry the LLM later passes
`fallback=False` and gets the retryable `LLMError` instead.

What a summary holds (SPEC section 3): the `covers msg:a-b` range it stands for; the key
facts, decisions and open questions (the prompt asks for those); the user's intent
verbatim where short. Because an LLM cannot be trusted to quote exactly, the first 500
characters of every covered user message are appended verbatim unless the answer already
contains them - the spec's "summaries keep at least the first 500 characters of user text
they cover".

The summariser's own input is kept inside its window: messages are rendered as a plain
transcript and greedily packed into chunks of at most `max_input_tokens`; a single
message larger than a chunk is cut in the middle. Each chunk is summarised separately and
the parts are joined, each naming its own sub-range.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from app.core.tokens import count_text
from app.llm.client import LLMClient
from app.llm.errors import LLMError
from app.memory.heuristic_summariser import SummaryDraft, count_tokens, heuristic_summary

log = logging.getLogger("loom.memory.llm_summariser")

USER_QUOTE_CHARS = 500
DEFAULT_MAX_TOKENS = 600
DEFAULT_MAX_INPUT_TOKENS = 100_000
# Room for the instructions around the transcript, so a chunk plus framing fits.
_FRAME_TOKENS = 400
_TOOL_TEXT_CHARS = 4000  # tool inputs/results are detail, not what a summary keeps

SYSTEM_PROMPT = """\
You compress the older part of a conversation between a user and an AI agent, so the \
agent can keep working without the full transcript. Write a dense summary in plain \
prose or short bullet points, at most about 200 words. Keep:
- key facts (names, numbers, ids, file paths, URLs, values that were looked up or computed);
- decisions made and why, and what was done (including tool calls and their outcomes);
- open questions, pending tasks and anything the agent promised to do;
- the user's intent and requests, quoted verbatim when they are short.
Do not invent anything. Do not address the user. Output only the summary."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} chars cut]"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return str(block)
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return (
            f"[tool call {block.get('name', '?')} id={block.get('id', '?')}: "
            f"{_clip(_json(block.get('input', {})), _TOOL_TEXT_CHARS)}]"
        )
    if kind == "tool_result":
        inner = block.get("content")
        inner_text = (
            inner if isinstance(inner, str) else "\n".join(_block_text(b) for b in (inner or []))
        )
        error = " (error)" if block.get("is_error") else ""
        return (
            f"[tool result{error} id={block.get('tool_use_id', '?')}: "
            f"{_clip(inner_text, _TOOL_TEXT_CHARS)}]"
        )
    if kind in ("image", "document"):
        return f"[{kind}]"
    return _clip(_json(block), _TOOL_TEXT_CHARS)


def message_text(message: dict[str, Any]) -> str:
    """The readable text of one canonical message (content blocks and tool calls)."""
    content = message.get("content")
    if content is None:
        parts: list[str] = []
    elif isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [_block_text(b) for b in content]
    else:
        parts = [_block_text(content)]
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            fn = call.get("function")  # OpenAI shape: {"id", "function": {name, arguments}}
            if isinstance(fn, dict):
                call = {"id": call.get("id"), "name": fn.get("name"), "input": fn.get("arguments")}
            parts.append(_block_text({**call, "type": "tool_use"}))
    return "\n".join(p for p in parts if p)


def user_text(message: dict[str, Any]) -> str:
    """What the user typed in this message ("" for non-user and tool-result-only messages)."""
    if message.get("role") != "user":
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        ).strip()
    return ""


def render_message(message: dict[str, Any]) -> str:
    """One transcript line: `[msg 12] user: ...`."""
    return f"[msg {message.get('seq')}] {message.get('role', '?')}: {message_text(message)}"


def covers_tag(start_seq: int, end_seq: int) -> str:
    """The range marker every summary carries."""
    return f"covers msg:{start_seq}-{end_seq}"


def build_prompt(messages: Sequence[dict[str, Any]], transcript: str | None = None) -> str:
    """The user prompt for one chunk of messages."""
    start, end = messages[0]["seq"], messages[-1]["seq"]
    body = (
        transcript if transcript is not None else "\n\n".join(render_message(m) for m in messages)
    )
    return (
        f"Summarise this part of the conversation ({covers_tag(start, end)}).\n\n"
        f"<transcript>\n{body}\n</transcript>\n\nSummary:"
    )


def _cut_middle(text: str, max_tokens: int) -> str:
    """Keep the head and tail of an oversized message so it fits `max_tokens`."""
    if count_text(text) <= max_tokens:
        return text
    # Characters per token varies; shrink until it fits (a few iterations at most).
    keep = max(200, max_tokens * 3)
    while True:
        head, tail = text[: keep * 2 // 3], text[-(keep // 3) :]
        cut = f"{head}\n[... {len(text) - len(head) - len(tail)} chars omitted ...]\n{tail}"
        if count_text(cut) <= max_tokens or keep <= 200:
            return cut
        keep = keep * 3 // 4


def split_for_window(
    messages: Sequence[dict[str, Any]], max_input_tokens: int
) -> list[tuple[list[dict[str, Any]], str]]:
    """Pack messages into chunks whose rendered transcript fits the summariser's window.

    Returns (messages, transcript) pairs in order; every message is in exactly one chunk.
    """
    budget = max(256, max_input_tokens - _FRAME_TOKENS - count_text(SYSTEM_PROMPT))
    chunks: list[tuple[list[dict[str, Any]], str]] = []
    current: list[dict[str, Any]] = []
    lines: list[str] = []
    used = 0
    for message in messages:
        line = _cut_middle(render_message(message), budget)
        cost = count_text(line) + 2
        if current and used + cost > budget:
            chunks.append((current, "\n\n".join(lines)))
            current, lines, used = [], [], 0
        current.append(message)
        lines.append(line)
        used += cost
    if current:
        chunks.append((current, "\n\n".join(lines)))
    return chunks


def with_user_quotes(summary: str, messages: Sequence[dict[str, Any]]) -> str:
    """Append the first 500 chars of each covered user message the summary does not quote."""
    quotes = []
    for message in messages:
        text = user_text(message)
        if not text:
            continue
        head = text[:USER_QUOTE_CHARS]
        if head in summary:
            continue
        more = "..." if len(text) > USER_QUOTE_CHARS else ""
        quotes.append(f'- msg:{message.get("seq")}: "{head}{more}"')
    if not quotes:
        return summary
    return summary + "\nUser said (verbatim):\n" + "\n".join(quotes)


async def _llm_text(
    client: LLMClient,
    messages: Sequence[dict[str, Any]],
    *,
    max_tokens: int,
    max_input_tokens: int,
    model: str | None,
) -> str:
    parts = []
    chunks = split_for_window(messages, max_input_tokens)
    for chunk, transcript in chunks:
        answer = await client.complete(
            SYSTEM_PROMPT, build_prompt(chunk, transcript), max_tokens=max_tokens, model=model
        )
        if len(chunks) > 1:
            answer = f"({covers_tag(chunk[0]['seq'], chunk[-1]['seq'])}) {answer}"
        parts.append(answer)
    return "\n".join(parts)


async def summarise(
    client: LLMClient | None,
    messages: Sequence[dict[str, Any]],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS,
    model: str | None = None,
    fallback: bool = True,
) -> SummaryDraft:
    """One `SummaryDraft` for `messages` (a contiguous seq range, oldest first).

    LLM summary (`method="llm"`) when a client is configured and answers; otherwise the
    heuristic summary (`method="heuristic"`) and a log line. With `fallback=False`, a
    retryable `LLMError` is re-raised instead of falling back (the caller will retry later).
    """
    if not messages:
        raise ValueError("summarise needs at least one message")
    start, end = int(messages[0]["seq"]), int(messages[-1]["seq"])
    if client is None:
        return heuristic_summary(list(messages))
    try:
        answer = await _llm_text(
            client, messages, max_tokens=max_tokens, max_input_tokens=max_input_tokens, model=model
        )
    except LLMError as exc:
        if not fallback and exc.retryable:
            raise
        log.warning(
            "LLM summary of msg:%d-%d failed (%s); using heuristic summary", start, end, exc.message
        )
        return heuristic_summary(list(messages))
    except Exception as exc:  # a bug in a client must not cost the summary either
        log.warning(
            "LLM summary of msg:%d-%d crashed (%s); using heuristic summary",
            start,
            end,
            type(exc).__name__,
        )
        return heuristic_summary(list(messages))
    text = with_user_quotes(f"[{covers_tag(start, end)}] {answer}", messages)
    # count_tokens: the same stored-summary cost the heuristic drafts use (text + overhead).
    return SummaryDraft(
        start_seq=start, end_seq=end, text=text, method="llm", token_count=count_tokens(text)
    )

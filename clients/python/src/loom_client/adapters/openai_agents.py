"""The OpenAI Agents SDK's session memory on a Loom session: `LoomSession`.

```python
from agents import Agent, Runner
from loom_client import AsyncLoomClient
from loom_client.adapters.openai_agents import LoomSession

loom = AsyncLoomClient(url, key, agent_id="support-bot")
session = LoomSession("user-42", loom)            # the SDK's session id, any string
await Runner.run(agent, "Where is my order?", session=session)
await session.get_items()                         # what the run added, item for item
await session.loom_session_id()                   # the Loom session holding them
```

Each item the SDK adds becomes one Loom message in the OpenAI shape (so search, recall,
summaries and the context builder read it): user/system/developer and assistant messages
as text, `function_call` as an assistant tool call, `function_call_output` as its tool
result, anything else (reasoning, hosted tools) as a short assistant text such as
`[reasoning] ...`. The item itself is kept verbatim in the message's metadata
(`openai_agents.item`), and `get_items` returns those, so items round-trip exactly; a
message appended by something else comes back converted from its Loom form.

The SDK's session id maps to a Loom session through a shared-memory entry in the caller's
`agent` namespace (key `openai-agents/sessions/<session id>`; the client must act as an
agent: an agent key, or a service key with `agent_id=`). The Loom session is created on the
first `add_items`, with `config`, `user_id`, `metadata` and `rom` as given.

Loom keeps a session's history for good (no message is ever deleted), so:
- `clear_session` deletes the Loom session (its messages, summaries and searchable text)
  and the mapping; the next `add_items` starts a new Loom session;
- `pop_item` copies every item but the last into a new Loom session (original times kept),
  points the mapping at it and deletes the old one: one read and one append per 200 items,
  and the Loom session id changes. Summaries of the old session are rebuilt by Loom later.

Long runs: with `context=True` (or `await session.context_items()`), `get_items()` returns
Loom's built context instead of the whole history: one system message (ROM, summaries of
older turns, recalled turns' note, knowledge blocks) and then the newest turns as they were
added, within the Loom session's token budget. `get_items(limit=n)` still returns the last n
items as added (the SDK's rewind compares them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast
from urllib.parse import quote

from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from loom_client._async.client import AsyncLoomClient
from loom_client.errors import Conflict, NotFound, PreconditionFailed
from loom_client.models.sessions import Message
from loom_client.models.shared_memory import SharedMemoryEntry

__all__ = ["LoomSession", "item_to_message", "message_to_items"]

META = "openai_agents"
MAPPING_NAMESPACE = "agent"
MAPPING_PREFIX = "openai-agents/sessions/"
APPEND_BATCH = 200
PAGE = 200
SWAP_ATTEMPTS = 3


# --- items <-> Loom messages (pure) ------------------------------------------------------


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return ""
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return str(part.get("text") or "")
    if kind == "refusal":
        return str(part.get("refusal") or "")
    if kind == "input_image":
        return "[image]"
    if kind == "input_file":
        return f"[file {part.get('filename') or part.get('file_id') or ''}]".replace(" ]", "]")
    return f"[{kind}]" if kind else ""


def content_text(content: Any) -> str:
    """The text of a Responses-API content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_part_text(p) for p in content) if t)
    return _part_text(content)


def _arguments(raw: Any) -> str:
    """Tool-call arguments Loom can parse (a JSON object); anything else is wrapped."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return json.dumps({"arguments": raw})
        return raw if isinstance(parsed, dict) else json.dumps({"arguments": parsed})
    return json.dumps(raw if isinstance(raw, dict) else {"arguments": raw})


def item_to_message(item: Mapping[str, Any]) -> dict[str, Any]:
    """One SDK input item as one Loom message (OpenAI shape), the item in its metadata."""
    kind = item.get("type")
    role = item.get("role")
    message: dict[str, Any]
    if kind == "function_call":
        call = {
            "id": str(item.get("call_id") or item.get("id") or ""),
            "type": "function",
            "function": {
                "name": str(item.get("name") or "tool"),
                "arguments": _arguments(item.get("arguments")),
            },
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    elif kind == "function_call_output":
        message = {
            "role": "tool",
            "tool_call_id": str(item.get("call_id") or ""),
            "content": content_text(item.get("output")),
        }
    elif role in ("user", "assistant", "system", "developer") and kind in (None, "message"):
        message = {
            "role": "system" if role == "developer" else role,
            "content": content_text(item.get("content")),
        }
    else:
        text = content_text(item.get("summary")) or content_text(item.get("content"))
        label = f"[{kind or 'item'}]"
        message = {"role": "assistant", "content": f"{label} {text}".strip()}
    message["metadata"] = {META: {"item": dict(item)}}
    return message


def message_to_items(message: Mapping[str, Any]) -> list[TResponseInputItem]:
    """The SDK items of a stored Loom message: the item it was added as, or else a
    conversion of its canonical form (`Message.model_dump()`) or its OpenAI form."""
    meta = message.get("metadata") or {}
    stored = meta.get(META) if isinstance(meta, Mapping) else None
    if isinstance(stored, Mapping) and isinstance(stored.get("item"), Mapping):
        return [cast(TResponseInputItem, dict(stored["item"]))]
    role = str(message.get("role") or "user")
    items: list[dict[str, Any]] = []
    text = content_text(message.get("content"))
    if role == "tool":
        call_id = message.get("tool_use_id") or message.get("tool_call_id") or ""
        items.append({"type": "function_call_output", "call_id": call_id, "output": text})
    else:
        if text or not message.get("tool_calls"):
            items.append({"role": role, "content": text})
        for call in message.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call.get("function"), Mapping) else None
            name = fn.get("name") if fn else call.get("name")
            args = fn.get("arguments") if fn else json.dumps(call.get("input") or {})
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id") or "",
                    "name": name or "tool",
                    "arguments": args or "{}",
                }
            )
    return [cast(TResponseInputItem, i) for i in items]


def _text(layer: Any, field: str = "text") -> str:
    return str(layer.get(field) or "") if isinstance(layer, Mapping) else ""


def _summaries(l2: Sequence[Mapping[str, Any]]) -> str:
    """The summaries as the server's system prompt shows them (`app.context.builder`)."""
    if not l2:
        return ""
    return "## Earlier conversation (summaries)\n" + "\n\n".join(str(s["text"]) for s in l2)


def _as_mapping(item: Any) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return cast(Mapping[str, Any], dump(exclude_unset=True, mode="json"))
    raise TypeError(f"a session item must be a mapping, not {type(item).__name__}")


def _reappend(message: Message) -> dict[str, Any]:
    """A stored message as an append input again (for pop_item's copy), time kept."""
    meta = message.metadata.get(META) if isinstance(message.metadata, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get("item"), dict):
        out = item_to_message(meta["item"])
    else:
        out = {"role": message.role, "content": message.content, "metadata": dict(message.metadata)}
        if message.role == "tool":
            out["tool_call_id"] = message.tool_use_id
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {"name": c.get("name"), "arguments": json.dumps(c.get("input"))},
                }
                for c in message.tool_calls
            ]
    out["created_at"] = message.created_at.isoformat()
    return out


# --- the session ---------------------------------------------------------------------------


class LoomSession:
    """An Agents SDK `Session` whose history is a Loom session (see the module docstring).

    `session_id`: the SDK's id (any string). `client`: an `AsyncLoomClient` acting as an
    agent. `config`, `user_id`, `metadata`, `rom` (e.g. `{"system_prompt": ...}`): the Loom
    session's, when this creates it. `context=True`: `get_items()` without a limit returns
    Loom's built context (see `context_items`). `session_settings`: the SDK's (`limit`).
    """

    def __init__(
        self,
        session_id: str,
        client: AsyncLoomClient,
        *,
        config: Mapping[str, Any] | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        rom: Mapping[str, Any] | None = None,
        context: bool = False,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        self.session_id = session_id
        self.session_settings: SessionSettings | None = session_settings or SessionSettings()
        self.client = client
        self.config = dict(config) if config is not None else None
        self.user_id = user_id
        self.metadata = dict(metadata) if metadata is not None else None
        self.rom = dict(rom) if rom is not None else None
        self.context = context
        self._key = MAPPING_PREFIX + quote(session_id, safe="").replace(".", "%2E")

    # - the SDK's protocol -------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history, oldest first (with `limit`: the newest `limit` items); with
        `context=True` and no limit, Loom's built context."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is None and self.context:
            return await self.context_items()
        mapping = await self._mapping()
        if mapping is None or (limit is not None and limit <= 0):
            return []
        messages = await self._messages(mapping[0], limit)
        items = [item for m in messages for item in message_to_items(m.model_dump())]
        return items[-limit:] if limit is not None else items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, one Loom message each, in one request per 200."""
        if not items:
            return
        messages = [item_to_message(_as_mapping(i)) for i in items]
        session_id = await self._session_for_write()
        try:
            await self.client.append_messages(session_id, messages[:APPEND_BATCH])
        except NotFound:
            # the Loom session was deleted behind the mapping (an erasure, another client):
            # forget it and start a new one
            await self._forget(session_id)
            session_id = await self._session_for_write()
            await self.client.append_messages(session_id, messages[:APPEND_BATCH])
        for start in range(APPEND_BATCH, len(messages), APPEND_BATCH):
            await self.client.append_messages(session_id, messages[start : start + APPEND_BATCH])

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (None when empty); see the module docstring."""
        for _ in range(SWAP_ATTEMPTS):
            mapping = await self._mapping()
            if mapping is None:
                return None
            old_id, version = mapping
            messages = await self._messages(old_id, None)
            if not messages:
                return None
            popped = message_to_items(messages[-1].model_dump())[-1]
            if len(messages) == 1:
                if await self._drop(old_id, version):
                    return popped
                continue
            new_id = await self._create()
            kept = [_reappend(m) for m in messages[:-1]]
            for start in range(0, len(kept), APPEND_BATCH):
                await self.client.append_messages(new_id, kept[start : start + APPEND_BATCH])
            try:
                await self.client.put_shared_memory(
                    MAPPING_NAMESPACE, self._key, {"loom_session_id": new_id}, if_match=version
                )
            except (Conflict, PreconditionFailed):
                await self._delete_session(new_id)  # someone else changed it: start over
                continue
            await self._delete_session(old_id)
            return popped
        raise Conflict(
            f"session {self.session_id!r} kept changing during pop_item; try again",
            status=409,
            code="version_conflict",
        )

    async def clear_session(self) -> None:
        """Delete the Loom session and the mapping; the next add starts a new session."""
        mapping = await self._mapping()
        if mapping is not None:
            await self._drop(*mapping)

    # - long runs ----------------------------------------------------------------------------

    async def context_items(
        self, *, recall: Mapping[str, Any] | None = None
    ) -> list[TResponseInputItem]:
        """Loom's built context as SDK items: one system message (ROM, Kernel, summaries,
        knowledge blocks, the recall note) and then the turns in the context, each the
        item it was added as (a turn Loom truncated to fit comes back in its shortened
        form). `recall`: automatic recall for this build (`{"enabled": True}`)."""
        mapping = await self._mapping()
        if mapping is None:
            return []
        built = await self.client.build_context(mapping[0], format="raw", recall=recall)
        layers = built.layers or {}
        system = "\n\n".join(
            t
            for t in (
                _text(layers.get("rom")),
                _text(layers.get("kernel")),
                *(_text(b) for b in layers.get("blocks") or []),
                _summaries(layers.get("l2") or []),
                _text(layers.get("recalled"), "note"),
            )
            if t
        )
        recalled = (layers.get("recalled") or {}).get("messages") or []
        older = sorted([*(layers.get("promoted") or []), *recalled], key=lambda m: m["seq"])
        turns = [*older, *(layers.get("l1") or [])]
        originals = await self._by_seq(mapping[0], [m["seq"] for m in turns])
        truncated = set(built.compression.truncated_seqs)
        items: list[TResponseInputItem] = []
        if system:
            items.append(cast(TResponseInputItem, {"role": "system", "content": system}))
        for turn in turns:
            original = originals.get(turn["seq"])
            use = original.model_dump() if original and turn["seq"] not in truncated else turn
            items.extend(message_to_items(use))
        return items

    async def loom_session_id(self) -> str | None:
        """The Loom session holding the history now (None before the first add)."""
        mapping = await self._mapping()
        return mapping[0] if mapping else None

    # - Loom ---------------------------------------------------------------------------------

    async def _mapping(self) -> tuple[str, int] | None:
        try:
            entry = await self.client.get_shared_memory(MAPPING_NAMESPACE, self._key)
        except NotFound:
            return None
        if not isinstance(entry, SharedMemoryEntry) or not isinstance(entry.value, dict):
            return None
        return str(entry.value["loom_session_id"]), entry.version

    async def _create(self) -> str:
        session = await self.client.create_session(
            user_id=self.user_id,
            config=self.config,
            rom=self.rom,
            metadata={**(self.metadata or {}), META: {"session_id": self.session_id}},
        )
        return session.id

    async def _session_for_write(self) -> str:
        mapping = await self._mapping()
        if mapping is not None:
            return mapping[0]
        new_id = await self._create()
        try:
            await self.client.put_shared_memory(
                MAPPING_NAMESPACE, self._key, {"loom_session_id": new_id}, if_none_match="*"
            )
        except PreconditionFailed:  # created concurrently: use that one
            await self._delete_session(new_id)
            mapping = await self._mapping()
            if mapping is None:
                raise
            return mapping[0]
        return new_id

    async def _forget(self, loom_id: str) -> None:
        """Delete the mapping if it still points at `loom_id`."""
        mapping = await self._mapping()
        if mapping is not None and mapping[0] == loom_id:
            try:
                await self.client.delete_shared_memory(
                    MAPPING_NAMESPACE, self._key, if_match=mapping[1]
                )
            except (NotFound, Conflict, PreconditionFailed):
                pass  # changed meanwhile: whatever it points at now is used

    async def _drop(self, loom_id: str, version: int) -> bool:
        try:
            await self.client.delete_shared_memory(MAPPING_NAMESPACE, self._key, if_match=version)
        except NotFound:
            pass
        except (Conflict, PreconditionFailed):
            return False
        await self._delete_session(loom_id)
        return True

    async def _delete_session(self, loom_id: str) -> None:
        try:
            await self.client.delete_session(loom_id)
        except NotFound:
            pass

    async def _messages(self, loom_id: str, limit: int | None) -> list[Message]:
        """All messages, or enough of the newest for `limit` items (one item each)."""
        offset = None
        if limit is not None:
            try:
                count = (await self.client.get_session(loom_id)).message_count
            except NotFound:
                return []
            offset = max(0, count - limit)
        out: list[Message] = []
        cursor: str | None = None
        try:
            while True:
                page = await self.client.list_messages(
                    loom_id, offset=None if cursor else offset, limit=PAGE, cursor=cursor
                )
                out.extend(page.items)
                cursor = page.next_cursor
                if not cursor:
                    return out
        except NotFound:  # cleared meanwhile
            return []

    async def _by_seq(self, loom_id: str, seqs: Sequence[int]) -> dict[int, Message]:
        if not seqs:
            return {}
        wanted = set(seqs)
        out: dict[int, Message] = {}
        async for message in self.client.iter_messages(
            loom_id, after_seq=min(wanted) - 1, page_size=PAGE
        ):
            if message.seq in wanted:
                out[message.seq] = message
            if message.seq >= max(wanted):
                break
        return out

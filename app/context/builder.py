"""Build a session's context: load the layers, fit them in the budget, render messages.

The build is read-only (one state row, L1, L2 and promoted rows): pending compression
is shown with heuristic stand-ins (``app.memory.fit``) and replaced by the stored
summary once a job writes it. Rendering keeps every tool_use with its results: tool
calls whose results are not in the context and results whose call is not are left out
(the messages stay in swap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.context import blocks as block_registry
from app.core.tokens import content_text, count_message, count_text, encoding
from app.memory.errors import OverBudget
from app.memory.fastload import SessionRow
from app.memory.fit import View, fit
from app.memory.policy import BlockRecord
from app.memory.state import GAP_KEY, Loaded, canonical

# Headers of the summary block and a user filler when history starts with the assistant.
FORMAT_OVERHEAD_TOKENS = 24
FILLER_TEXT = "(Earlier conversation is summarised in the system prompt.)"


@dataclass
class Built:
    loaded: Loaded
    view: View
    blocks: list[block_registry.ContextBlock]
    summaries: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    layer_tokens: dict[str, int] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return sum(self.layer_tokens.values())


def _marker(seq: int) -> str:
    return f"[truncated by Loom Memory to fit the context budget; full text in msg:{seq}]"


def truncate(message: dict[str, Any], allowed: int) -> dict[str, Any]:
    """The message cut to at most ``allowed`` tokens (text kept from the start)."""

    calls = [{**c, "input": {}} for c in message.get("tool_calls") or []] or None
    marker = _marker(message["seq"])
    base = count_message(message["role"], marker, calls)
    tokens = encoding().encode_ordinary(content_text(message.get("content")))
    keep = max(0, allowed - base - 2)
    while True:
        text = encoding().decode(tokens[:keep]) + "\n" + marker if keep else marker
        if keep == 0 or count_message(message["role"], text, calls) <= allowed:
            return {**message, "content": text, "tool_calls": calls, "truncated": True}
        keep = max(0, keep - 8)


def _pair_tool_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop tool calls without a later result and results without an earlier call."""
    answered = {m["tool_use_id"] for m in messages if m["role"] == "tool"}
    out: list[dict[str, Any]] = []
    issued: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            if m["tool_use_id"] in issued:
                out.append(m)
            continue
        calls = m.get("tool_calls") or []
        kept = [c for c in calls if c["id"] in answered]
        if len(kept) != len(calls):
            m = {**m, "tool_calls": kept or None}
            if not kept and not m.get("content"):
                continue
        issued |= {c["id"] for c in kept}
        out.append(m)
    return out


async def build(open_db: block_registry.OpenDb, session_row: SessionRow, loaded: Loaded, *,
                providers: Sequence[block_registry.BlockProvider]) -> Built:
    """Everything a context response needs, within the session's budget, from what
    `app.memory.fastload.load_for_context` read. `open_db` opens a database session for
    the block providers that need one (see `app.context.blocks`)."""
    cfg = loaded.cfg
    fixed = loaded.state.rom_tokens + loaded.state.kernel_tokens + FORMAT_OVERHEAD_TOKENS
    if fixed > cfg.budget:
        raise OverBudget(f"ROM and Kernel alone ({fixed} tokens) exceed the budget "
                         f"({cfg.budget}); raise max_context_tokens or shrink the Kernel.")
    first = fit(loaded.layers, cfg, loaded.stand_in_tokens,
                overhead_tokens=FORMAT_OVERHEAD_TOKENS)
    free = cfg.budget - first.total_tokens
    extra = (await block_registry.collect(open_db, session_row, free, providers)
             if free > 0 and providers else [])
    layers = loaded.layers
    if extra:
        layers = replace(layers, blocks=tuple(BlockRecord(b.name, b.token_count)
                                              for b in extra))
    view = fit(layers, cfg, loaded.stand_in_tokens, overhead_tokens=FORMAT_OVERHEAD_TOKENS)
    kept_blocks = [b for b in extra if b.name not in set(view.dropped_blocks)]

    stored = {str(s.id): s for s in loaded.l2}
    summaries: list[dict[str, Any]] = []
    for rec in view.l2:
        if rec.stand_in:
            draft = loaded.stand_in([r for r in layers.l1
                                     if rec.start_seq <= r.seq <= rec.end_seq])
            summaries.append({"start_seq": rec.start_seq, "end_seq": rec.end_seq,
                              "text": draft.text, "method": draft.method,
                              "token_count": draft.token_count, "stand_in": True})
        elif rec.key == GAP_KEY and loaded.gap is not None:
            g = loaded.gap
            summaries.append({"start_seq": g.start_seq, "end_seq": g.end_seq, "text": g.text,
                              "method": g.method, "token_count": g.token_count,
                              "stand_in": True})
        else:
            s = stored[str(rec.key)]
            summaries.append({"start_seq": s.start_seq, "end_seq": s.end_seq, "text": s.text,
                              "method": s.method, "token_count": s.token_count,
                              "stand_in": False})

    rows = {m.seq: m for m in [*loaded.promoted, *loaded.l1]}
    messages: list[dict[str, Any]] = []
    for mrec in [*view.promoted, *view.l1]:
        msg = canonical(rows[mrec.seq])
        if mrec.seq in view.truncated:
            msg = truncate(msg, view.truncated[mrec.seq])
        messages.append(msg)
    messages = _pair_tool_calls(messages)
    promoted_seqs = {r.seq for r in view.promoted}

    def tokens_of(m: dict[str, Any]) -> int:
        if m.get("truncated") or m.get("tool_calls") != rows[m["seq"]].tool_calls:
            return count_message(m["role"], m.get("content"), m.get("tool_calls"))
        return rows[m["seq"]].token_count

    layer_tokens = {
        "rom": loaded.state.rom_tokens,
        "kernel": loaded.state.kernel_tokens,
        "blocks": sum(b.token_count for b in kept_blocks),
        "l2": sum(s["token_count"] for s in summaries),
        "promoted": sum(tokens_of(m) for m in messages if m["seq"] in promoted_seqs),
        "l1": sum(tokens_of(m) for m in messages if m["seq"] not in promoted_seqs),
        "overhead": FORMAT_OVERHEAD_TOKENS,
    }
    return Built(loaded=loaded, view=view, blocks=kept_blocks, summaries=summaries,
                 messages=messages, layer_tokens=layer_tokens)


def summary_text(summaries: list[dict[str, Any]]) -> str:
    if not summaries:
        return ""
    return "## Earlier conversation (summaries)\n" + "\n\n".join(s["text"] for s in summaries)


def filler_needed(messages: list[dict[str, Any]]) -> bool:
    first = next((m for m in messages if m["role"] != "system"), None)
    return first is not None and first["role"] != "user"


assert count_text(FILLER_TEXT) + 8 < FORMAT_OVERHEAD_TOKENS

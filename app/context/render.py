"""Render a built context as Anthropic, OpenAI or raw layers (pure)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from app.context.builder import FILLER_TEXT, Built, filler_needed, summary_text
from app.memory.layers import kernel_text, openai_tools
from app.messages.formats import to_anthropic, to_openai

CACHE = {"type": "ephemeral"}


def _texts(built: Built) -> list[tuple[str, str, bool]]:
    """(layer, text, cacheable) in system order: ROM, Kernel, blocks, L2."""
    state = built.loaded.state
    out = [("rom", state.rom_text, True), ("kernel", kernel_text(state.kernel or {}), True)]
    out += [(f"block:{b.name}", b.text, False) for b in built.blocks]
    out.append(("l2", summary_text(built.summaries), False))
    out.append(("recalled", built.recall_note, False))
    return [t for t in out if t[1]]


def _public_messages(built: Built) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "metadata"} for m in built.messages]


def anthropic(built: Built) -> dict[str, Any]:
    messages, system_in_history = to_anthropic(built.messages)
    if messages and messages[0]["role"] != "user" and filler_needed(built.messages):
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": FILLER_TEXT}]})
    system: list[dict[str, Any]] = []
    for _layer, text, cacheable in _texts(built):
        block: dict[str, Any] = {"type": "text", "text": text}
        if cacheable:
            block["cache_control"] = CACHE
        system.append(block)
    system += [{"type": "text", "text": t} for t in system_in_history if t]
    return {
        "system": system,
        "messages": messages,
        "tools": (built.loaded.state.kernel or {}).get("tools") or [],
    }


def openai(built: Built) -> dict[str, Any]:
    system = "\n\n".join(text for _, text, _ in _texts(built))
    messages = ([{"role": "system", "content": system}] if system else []) + to_openai(
        built.messages
    )
    return {
        "system": None,
        "messages": messages,
        "tools": openai_tools((built.loaded.state.kernel or {}).get("tools") or []),
    }


def raw(built: Built) -> dict[str, Any]:
    state = built.loaded.state
    promoted = {r.seq for r in built.view.promoted}
    recalled = set(built.recalled.seqs) if built.recalled else set()
    msgs = _public_messages(built)
    return {
        "system": None,
        "messages": [],
        "tools": (state.kernel or {}).get("tools") or [],
        "layers": {
            "rom": {"text": state.rom_text, "source": state.rom},
            "kernel": {"text": kernel_text(state.kernel or {}), **(state.kernel or {})},
            "blocks": [
                {"name": b.name, "text": b.text, "token_count": b.token_count} for b in built.blocks
            ],
            "facts": next(
                (
                    {"text": b.text, "token_count": b.token_count}
                    for b in built.blocks
                    if b.name == "facts"
                ),
                None,
            ),
            "l2": built.summaries,
            "promoted": [m for m in msgs if m["seq"] in promoted],
            "recalled": {
                "note": built.recall_note,
                **(_recall_public(built) or {}),
                "messages": [m for m in msgs if m["seq"] in recalled],
            },
            "l1": [m for m in msgs if m["seq"] not in promoted | recalled],
        },
    }


def _recall_public(built: Built) -> dict[str, Any] | None:
    """`app.context.schemas.RecallPublic` of a build (None: nothing recalled)."""
    chosen = built.recalled
    if chosen is None:
        return None
    scores = chosen.scores or {}
    return {
        "query": built.recall_query,
        "seqs": list(chosen.seqs),
        "hits": [
            {"seq": s, "score": v}
            for s, v in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
    }


RENDERERS = {"anthropic": anthropic, "openai": openai, "raw": raw}


def response(
    built: Built,
    fmt: str,
    extra: dict[str, Any] | None = None,
    payload: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The context response (`app.context.schemas.ContextPublic`) as plain data; `extra`:
    its `context_id`, `recorded` and `manifest` (`app.manifests.service.finish`),
    `payload`: the format's rendering when already made."""
    view = built.view
    total = built.total_tokens
    payload = payload if payload is not None else RENDERERS[fmt](built)
    return {
        **(extra or {}),
        "format": fmt,
        "system": payload["system"],
        "messages": payload["messages"],
        "tools": payload["tools"],
        "layers": payload.get("layers"),
        "tokens": built.layer_tokens,
        "total_tokens": total,
        "budget": view.budget,
        "usage": round(total / view.budget, 6),
        "l1_seqs": [m.seq for m in view.l1],
        "recall": _recall_public(built),
        "compression": {
            "pending": view.plan is not None,
            "triggers": list(view.plan.triggers) if view.plan else [],
            "stand_in_ranges": [[s.start_seq, s.end_seq] for s in view.stand_ins],
            "dropped_summaries": len([s for s in view.dropped_l2 if not s.stand_in]),
            "dropped_promoted": list(view.dropped_promoted),
            "dropped_blocks": list(view.dropped_blocks),
            "omitted_seqs": list(view.dropped_l1),
            "truncated_seqs": sorted(view.truncated),
            "decisions": list(view.decisions),
        },
    }


def response_json(
    built: Built,
    fmt: str,
    extra: dict[str, Any] | None = None,
    payload: dict[str, Any] | None = None,
) -> bytes:
    """`response` as UTF-8 JSON, serialised once (orjson; the stdlib for what orjson
    refuses, such as integers over 64 bits in stored content)."""
    data = response(built, fmt, extra, payload)
    try:
        return orjson.dumps(data)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()

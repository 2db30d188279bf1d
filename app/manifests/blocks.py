"""The blocks of a manifest (pure): every block of a build in the order the model reads it,
each with its layer, sources, tokens, `cache_control` and `why`; stored compact
(`blocks_of`) and expanded again (`expand_block`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.context.blocks import ContextBlock
from app.context.builder import Built
from app.context.render import CACHE
from app.core.tokens import count_message
from app.manifests.hashes import versions_of
from app.memory.aggregate import GAP_KEY
from app.memory.layers import kernel_text
from app.memory.policy import SummaryRecord

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


def provider_block(block: ContextBlock) -> dict[str, Any]:
    """A provider's block: its reason in the provider's words (a block without one is
    named), with the share of the budget it was offered."""
    name, replay = block.name, dict(block.replay)
    share = replay.get("share")
    offered = replay.get("limit")
    within = (
        f" within its share {share} of the budget ({offered} tokens offered)"
        if share is not None
        else ""
    )
    why = f"{block.why or f'Context block {name!r} of a provider'}{within}."
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
    out += [provider_block(b) for b in built.blocks]
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

"""The difference between two context manifests (pure).

Blocks are matched by their `key` (`rom`, `kernel`, `block:<name>`, `summary:<id>`,
`stand_in:<a>-<b>`, `gap:<a>-<b>`, `recall_note`, `msg:<seq>`), which names what a block
stands for: the same message in both builds is the same block even when it moved from L1 to
recalled, or was truncated in one of them. A block in `b` only is added, in `a` only
removed; one in both is changed when its layer, tokens, sources, truncation or left-out
tool calls differ (its position alone does not make it changed: everything after an added
block moves). Token deltas are `b - a`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# What makes two blocks with the same key differ (positions and `why` follow from these; a
# provider block's rendering inputs, such as the query its facts matched, change with every
# turn and show in `sources` and `tokens` when they change what it holds).
COMPARED = ("layer", "tokens", "cache_control", "sources", "truncated_to", "tool_calls_left_out")


def _summary(block: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "key": block["key"],
        "layer": block["layer"],
        "tokens": block.get("tokens") or 0,
        "position": block.get("position"),
    }


def _tokens(block: Mapping[str, Any]) -> int:
    return int(block.get("tokens") or 0)


def diff_blocks(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Added, removed and changed blocks between block lists `a` and `b` (keys unique per
    list), in `b`'s order (removed: in `a`'s), with token deltas."""
    in_a = {x["key"]: x for x in a}
    in_b = {x["key"]: x for x in b}
    added = [{**_summary(x), "token_delta": _tokens(x)} for x in b if x["key"] not in in_a]
    removed = [{**_summary(x), "token_delta": -_tokens(x)} for x in a if x["key"] not in in_b]
    changed: list[dict[str, Any]] = []
    for x in b:
        old = in_a.get(x["key"])
        if old is None:
            continue
        fields = [f for f in COMPARED if old.get(f) != x.get(f)]
        if fields:
            changed.append(
                {
                    "key": x["key"],
                    "layer_a": old["layer"],
                    "layer_b": x["layer"],
                    "tokens_a": _tokens(old),
                    "tokens_b": _tokens(x),
                    "token_delta": _tokens(x) - _tokens(old),
                    "fields": fields,
                }
            )
    unchanged = sum(1 for x in b if x["key"] in in_a) - len(changed)
    return {
        "added": added,
        "removed": removed,
        "changed": changed,
        "unchanged": unchanged,
        "token_delta": sum(_tokens(x) for x in b) - sum(_tokens(x) for x in a),
    }


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The diff of two manifests: blocks, then tokens per layer, budget and hashes."""
    out = diff_blocks(a["blocks"], b["blocks"])
    layers = sorted(set(a["tokens"]) | set(b["tokens"]))
    out["layer_token_deltas"] = {
        k: b["tokens"].get(k, 0) - a["tokens"].get(k, 0)
        for k in layers
        if b["tokens"].get(k, 0) != a["tokens"].get(k, 0)
    }
    out["total_tokens_a"], out["total_tokens_b"] = a["total_tokens"], b["total_tokens"]
    out["budget_a"], out["budget_b"] = a["budget"], b["budget"]
    out["same_bytes"] = {
        f: a["sha256"].get(f) == b["sha256"].get(f)
        for f in sorted(set(a["sha256"]) & set(b["sha256"]))
    }
    out["config_changed"] = a.get("config_sha256") != b.get("config_sha256")
    return out

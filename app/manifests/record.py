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
and `app.manifests.replay` re-reads those sources to render the same bytes again. Erased
sources are then missing, never resurrected from the manifest.

Its blocks are made by `app.manifests.blocks`, its hashes (of the rendered formats, the ROM,
the Kernel and the config) by `app.manifests.hashes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.context.builder import Built
from app.manifests.blocks import blocks_of, expand_block
from app.manifests.hashes import tokenizer_info, versions_of
from app.memory.aggregate import GAP_KEY

MANIFEST_VERSION = 1


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
    """The full manifest (`app.context.schemas.ManifestPublic`) of a stored one
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

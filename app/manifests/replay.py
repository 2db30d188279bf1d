"""Replay a recorded build: re-read the sources its manifest names and render the same
bytes again (`app.manifests.record`), or say what changed or was erased since.

`load_sources` is the I/O (the session's memory through the aggregate's read, the
summaries, messages, facts, memory items and learned version the manifest names); `rebuild`
is pure: it checks every source against the manifest and lists each that no longer
matches, then hands what the build chose to the builder's replay half
(`builder.replayed_summary`, `builder.rebuilt`: truncation, tool-call pairing, the recall
note, stand-in summaries) and each provider block to its `BlockReplay`. A source that changed
or was erased makes the replay a 409 naming it; the manifest holds no content, so an
erased source is never brought back from it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import asyncpg

from app.context import builder
from app.context.blocks import ContextBlock
from app.context.render import RENDERERS
from app.core.errors import Conflict
from app.knowledge import repository as knowledge_repository
from app.manifests import hashes
from app.memory import repository as memory_repository
from app.memory.aggregate import Loaded, load
from app.models.memory_summary import SummaryRow
from app.models.message import StoredMessage


class ContextChanged(Conflict):
    code = "context_changed"


@dataclass
class Sources:
    """What a manifest's sources are now."""

    # the session's memory as the aggregate reads it (its session row, ROM and Kernel: no
    # L1 is read, the manifest names its messages)
    memory: Loaded
    summaries: dict[str, SummaryRow] = field(default_factory=dict)
    messages: dict[int, StoredMessage] = field(default_factory=dict)
    items: dict[str, Any] = field(default_factory=dict)  # facts and memory items by id
    learned: dict[tuple[str, int], Any] = field(default_factory=dict)


def _ranges(blocks: Sequence[Mapping[str, Any]]) -> list[int]:
    seqs: set[int] = set()
    for b in blocks:
        src = b["sources"][0] if b["sources"] else {}
        if src.get("kind") == "message":
            seqs.add(int(src["seq"]))
        elif src.get("kind") == "stand_in":
            a, z = src["range"]
            seqs.update(range(int(a), int(z) + 1))
    return sorted(seqs)


async def load_sources(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    manifest: Mapping[str, Any],
) -> Sources:
    """The sources `manifest` names, as they are now: the memory through the aggregate's
    read (`app.memory.aggregate.load`), the summaries it named (in L2 or archived since),
    messages, items and learned versions, on `handle`'s connection. (`handle`: a
    connection, or a session for the knowledge rows' reads that still take one.)"""
    blocks = manifest["blocks"]
    memory = await load(conn, tenant_id, session_id, window=memory_repository.oldest(0))
    out = Sources(memory=memory)
    summary_ids = [
        uuid.UUID(s["id"]) for b in blocks for s in b["sources"] if s.get("kind") == "summary"
    ]
    if summary_ids:
        out.summaries = {s.id: s for s in memory.l2 if uuid.UUID(s.id) in set(summary_ids)}
        gone = [i for i in summary_ids if str(i) not in out.summaries]
        if gone:  # archived in a snapshot since the build
            found = await memory_repository.summaries(conn, tenant_id, session_id, gone)
            out.summaries.update({s.id: s for s in found})
    seqs = _ranges(blocks)
    if seqs:
        rows_ = await memory_repository.messages_by_seqs(conn, tenant_id, session_id, seqs)
        out.messages = {int(r.seq): r for r in rows_}
    item_ids = [
        uuid.UUID(s["id"])
        for b in blocks
        for s in b["sources"]
        if s.get("kind") in ("fact", "memory_item")
    ]
    if item_ids:
        rows = await knowledge_repository.get_rows(conn, tenant_id, item_ids)
        out.items = {str(r.id): r for r in rows}
    for b in blocks:
        for s in b["sources"]:
            if s.get("kind") == "learned":
                row = await knowledge_repository.get_learned_version(
                    conn, tenant_id, s["agent_id"], int(s["version"])
                )
                if row is not None:
                    out.learned[(s["agent_id"], int(s["version"]))] = row
    return out


# --- pure -------------------------------------------------------------------------------


class BlockReplay(Protocol):
    """Re-renders a provider's recorded block: from what the build recorded to re-render it
    (`ContextBlock.replay`: header, limit...), the block's sources and their rows as they
    are now (in the sources' order, each at the version the build used), the same text, or
    None when it no longer renders. The providers' domains implement it beside their
    `BlockProvider`; `app.wiring` joins them by block name (`manifest_service.BlockReplays`),
    so replay knows no provider's rendering."""

    def __call__(
        self, replay: Mapping[str, Any], sources: Sequence[Mapping[str, Any]], rows: Sequence[Any]
    ) -> str | None: ...


def _rows(block: Mapping[str, Any], sources: Sources, changes: list[str]) -> list[Any] | None:
    """The rows of a provider block's sources as the build used them; None (and why in
    `changes`) when one was erased or changed since."""
    rows = []
    for s in block["sources"]:
        if s.get("kind") == "learned":
            learned = sources.learned.get((s["agent_id"], int(s["version"])))
            if learned is None:
                changes.append(
                    f"learned version {s['version']} of agent {s['agent_id']!r} was erased"
                )
            else:
                rows.append(learned)
            continue
        what = str(s.get("kind", "source")).replace("_", " ")
        row = sources.items.get(s["id"])
        if row is None:
            changes.append(f"{what} {s['id']} was erased")
        elif int(row.version) != int(s["version"]):
            changes.append(f"{what} {s['id']} changed (version {s['version']} -> {row.version})")
        else:
            rows.append(row)
    return rows if len(rows) == len(block["sources"]) else None


def _provider_block(
    block: Mapping[str, Any],
    sources: Sources,
    changes: list[str],
    replays: Mapping[str, BlockReplay],
) -> ContextBlock | None:
    name, replay = block["name"], block["replay"] or {}
    again = replays.get(name)
    if again is None:
        changes.append(f"block {name!r} cannot be replayed (no renderer for it)")
        return None
    rows = _rows(block, sources, changes)
    if rows is None:
        return None
    text = again(replay, block["sources"], rows)
    if text is None:
        changes.append(f"block {name!r} no longer renders from its sources")
        return None
    return ContextBlock(
        name=name,
        text=text,
        token_count=int(block["tokens"]),
        sources=tuple(block["sources"]),
        replay=dict(replay),
    )


def _summary(
    block: Mapping[str, Any], sources: Sources, changes: list[str]
) -> dict[str, Any] | None:
    src = block["sources"][0]
    a, z = (int(v) for v in src["range"])
    if src["kind"] == "gap":
        return builder.replayed_summary(a, z)
    if src["kind"] == "stand_in":
        if any(s not in sources.messages for s in range(a, z + 1)):
            changes.append(f"messages of the stand-in for msg:{a}-{z} were erased")
            return None
        return builder.replayed_summary(
            a, z, stand_in_of=[sources.messages[s] for s in range(a, z + 1)]
        )
    s = sources.summaries.get(src["id"])
    if s is None:
        changes.append(f"summary {src['id']} (msg:{a}-{z}) was erased")
        return None
    return builder.replayed_summary(s.start_seq, s.end_seq, stored=s)


def rebuild(
    manifest: Mapping[str, Any], sources: Sources, replays: Mapping[str, BlockReplay]
) -> tuple[builder.Built | None, list[str]]:
    """The build again from `sources`, and what no longer matches (then no build).
    `replays`: each provider block's renderer by block name (`BlockReplays`, made by
    `app.wiring`)."""
    changes: list[str] = []
    state = sources.memory.state
    versions = manifest["versions"]
    if hashes.rom_sha256(state.rom_text or "") != versions["rom_sha256"]:
        changes.append("the ROM changed")
    if hashes.kernel_sha256(state.kernel) != versions["kernel_sha256"]:
        changes.append("the Kernel changed (tools, schemas or the large-result reference)")
    blocks: list[ContextBlock] = []
    summaries: list[dict[str, Any]] = []
    promoted: list[int] = []
    l1: list[tuple[int, int | None]] = []
    recalled: list[int] = []
    scores: dict[int, float] = {}
    query = ""
    for b in manifest["blocks"]:
        layer = b["layer"]
        if layer == "block":
            made = _provider_block(b, sources, changes, replays)
            if made is not None:
                blocks.append(made)
        elif layer == "l2":
            summary = _summary(b, sources, changes)
            if summary is not None:
                summaries.append(summary)
        elif b["key"] == "recall_note":
            query = b["sources"][0]["query"]
        elif layer in ("promoted", "l1", "recalled"):
            src = b["sources"][0]
            seq = int(src["seq"])
            if seq not in sources.messages:
                changes.append(f"msg:{seq} was erased")
                continue
            if layer == "promoted":
                promoted.append(seq)
            elif layer == "l1":
                l1.append((seq, b.get("truncated_to")))
            else:
                recalled.append(seq)
                if src.get("score") is not None:
                    scores[seq] = float(src["score"])
    if changes:
        return None, changes
    rows = sources.messages
    built = builder.rebuilt(
        sources.memory,
        budget=int(manifest["budget"]),
        layer_tokens=dict(manifest["tokens"]),
        blocks=blocks,
        summaries=summaries,
        promoted=[rows[s] for s in promoted],
        l1=[(rows[s], cut) for s, cut in l1],
        recalled=[rows[s] for s in recalled],
        scores=scores,
        query=query,
    )
    return built, []


def render(
    manifest: Mapping[str, Any], built: builder.Built, fmt: str
) -> tuple[dict[str, Any], str]:
    """The replayed payload of `fmt` and its SHA-256. Every format whose hash the build
    recorded is rendered and checked first: 409 when one differs although every source
    matched (the rendering itself changed since). A format the build did not hash is the
    same rebuilt context rendered otherwise."""
    done: dict[str, tuple[dict[str, Any], str]] = {}
    for f in sorted(manifest["sha256"], key=lambda f: f != fmt):
        payload = RENDERERS[f](built)
        digest = hashes.sha256_hex(hashes.payload_bytes(payload))
        if manifest["sha256"][f] != digest:
            raise ContextChanged(
                f"The sources are unchanged but the {f} rendering differs from the recorded "
                "one: the server's rendering changed since this build.",
                details={
                    "changed": [f"the {f} rendering"],
                    "recorded_sha256": manifest["sha256"][f],
                    "sha256": digest,
                },
            )
        done[f] = payload, digest
    if fmt not in done:
        payload = RENDERERS[fmt](built)
        done[fmt] = payload, hashes.sha256_hex(hashes.payload_bytes(payload))
    return done[fmt]


def fill_hashes(manifest: dict[str, Any], built: builder.Built | None) -> dict[str, Any]:
    """The manifest with the formats it did not hash at the build computed from its
    replayed sources (`sha256_replayed`); unchanged when the sources changed."""
    manifest.setdefault("sha256_replayed", [])
    if built is None:
        return manifest
    for fmt in hashes.FORMATS:
        if fmt not in manifest["sha256"]:
            try:
                _, digest = render(manifest, built, fmt)
            except ContextChanged:
                return manifest
            manifest["sha256"][fmt] = digest
            manifest["sha256_replayed"].append(fmt)
    return manifest

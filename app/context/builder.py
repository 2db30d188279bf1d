"""Build a session's context: load the layers, fit them in the budget, render messages.

The build is read-only (one state row, L1, L2 and promoted rows): pending compression
is shown with heuristic stand-ins (``app.memory.fit``) and replaced by the stored
summary once a job writes it. Rendering keeps every tool_use with its results: tool
calls whose results are not in the context and results whose call is not are left out
(the messages stay in swap).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from app.context import blocks as block_registry
from app.core.tokens import content_text, count_message, count_text, encoding
from app.memory.aggregate import GAP_KEY, Loaded, canonical, gap_draft, record
from app.memory.errors import OverBudget
from app.memory.fit import View, fit
from app.memory.heuristic_summariser import heuristic_summary
from app.memory.policy import BlockRecord
from app.memory.recall_choice import (
    MIN_RECALL_TOKENS,
    RecallConfig,
    Recalled,
    RecallHit,
    choose,
    neighbourhood,
    tail,
)
from app.models.message import StoredMessage
from app.models.session import SessionRow

if TYPE_CHECKING:
    from app.context.schemas import ContextRequest

# Headers of the summary block and a user filler when history starts with the assistant.
FORMAT_OVERHEAD_TOKENS = 24
FILLER_TEXT = "(Earlier conversation is summarised in the system prompt.)"


class RecallSource(Protocol):
    """Where automatic recall searches (`app.context.swap_recall`): the session's swap."""

    config: RecallConfig

    async def search(
        self, query: str, exclude: list[int], exclude_from: int | None, limit: int
    ) -> list[tuple[StoredMessage, float]]:
        """The best messages of the session for `query`, not in `exclude` and older than
        `exclude_from` (when given), with scores."""
        ...

    async def load(self, seqs: list[int]) -> list[StoredMessage]:
        """The session's messages with these seqs (those that exist)."""
        ...


class FinishBuild(Protocol):
    """What a context build ends with (joined in `app.wiring`: `app.manifests.service.Finisher`):
    the response's `context_id`, `recorded` and `manifest`, and the format's payload when it
    was rendered already."""

    async def __call__(
        self, built: Built, body: ContextRequest | None, fmt: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]: ...


@dataclass
class Built:
    loaded: Loaded
    view: View
    blocks: list[block_registry.ContextBlock]
    summaries: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    layer_tokens: dict[str, int] = field(default_factory=dict)
    recalled: Recalled | None = None
    recall_query: str = ""
    recall_note: str = ""
    recalled_rows: dict[int, StoredMessage] = field(default_factory=dict)  # for the manifest

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
        calls = m.get("tool_calls")
        if calls:  # most messages make no call: nothing to pair
            kept = [c for c in calls if c["id"] in answered]
            if len(kept) != len(calls):
                m = {**m, "tool_calls": kept or None}
                if not kept and not m.get("content"):
                    continue
            issued.update(c["id"] for c in kept)
        out.append(m)
    return out


def recall_note(seqs: Sequence[int]) -> str:
    """The system text that says which messages are recalled."""
    listed = ", ".join(f"msg:{s}" for s in seqs)
    return (
        "## Recalled from earlier in this conversation\n"
        f"These older messages were found in this conversation's history for the newest "
        f"message and are shown before the recent ones: {listed}."
    )


@functools.cache
def _note_base_tokens() -> int:
    return count_text(recall_note([]))


def recall_note_bound(seqs: Sequence[int]) -> int:
    """At least the tokens of `recall_note(seqs)`, without tokenising it (the choice tries
    one selection per hit): cl100k splits a number into runs of up to 3 digits, and each
    `msg:N, ` adds at most 3 more tokens (a test checks the bound)."""
    return _note_base_tokens() + sum(4 + -(-len(str(s)) // 3) for s in seqs)


def newest_user_with_text(rows: Sequence[StoredMessage]) -> str | None:
    """The text of the newest of `rows` by the user that has text (what the block
    providers match against), or None when none has."""
    for m in reversed(rows):
        if m.role == "user":
            text = content_text(m.content)
            if text:
                return text
    return None


def newest_user_text(rows: Sequence[StoredMessage]) -> str:
    """The text of the newest user message (what recall searches for by default; a newest
    message without text, such as an image, recalls nothing)."""
    for m in reversed(rows):
        if m.role == "user":
            return content_text(m.content).strip()
    return ""


async def _recall(
    source: RecallSource, loaded: Loaded, shown: set[int], l1_from: int | None, free: int
) -> tuple[Recalled, str, dict[int, StoredMessage]] | None:
    """Recall within `free` tokens (`app.memory.recall_choice`): what was chosen, the query and
    the chosen rows; None when there is no room, no query or nothing to recall."""
    cfg = source.config
    tokens = cfg.tokens(loaded.cfg.budget, free)
    if tokens < MIN_RECALL_TOKENS:
        return None
    query = (cfg.query or newest_user_text(loaded.l1)).strip()
    if not query:
        return None
    # L1 is left out as a range (from its first message shown on, whatever is appended
    # later), the rest of what is shown (promoted messages) one by one: so the search asks
    # the same question for every build of one turn
    before = sorted(s for s in shown if l1_from is None or s < l1_from)
    found = await source.search(query, before, l1_from, min(50, 2 * cfg.message_cap))
    if not found:
        return None
    rows = {m.seq: m for m, _ in found}
    hits = [RecallHit(m.seq, score) for m, score in found]
    grouped = [h for h in hits if rows[h.seq].tool_calls or rows[h.seq].role == "tool"]
    if grouped:  # tool groups come whole: read what is around the hits that have tools
        wanted = [s for s in neighbourhood(grouped) if s not in rows]
        rows.update({m.seq: m for m in await source.load(wanted)})
    chosen = choose(
        hits,
        [record(rows[s]) for s in sorted(rows)],
        shown,
        tokens,
        cfg.message_cap,
        recall_note_bound,
        cfg.keep(loaded.cfg.budget, free),
    )
    room = cfg.message_cap - len(chosen.seqs)
    if cfg.adaptive and l1_from is not None and room > 0:  # the turns just before L1
        before_l1 = await source.load(list(range(max(1, l1_from - room), l1_from)))
        rows.update({m.seq: m for m in before_l1})
        chosen = tail(
            chosen,
            [record(m) for m in before_l1],
            shown,
            tokens,
            cfg.message_cap,
            recall_note_bound,
        )
    if not chosen.seqs:
        return None
    return chosen, query, {s: rows[s] for s in chosen.seqs}


def summary_dict(start_seq: int, end_seq: int, s: Any, *, stand_in: bool) -> dict[str, Any]:
    """An L2 entry of the response (and of a replay): the range, and `s`'s text, method and
    tokens (a stored summary, a stand-in draft or the gap's pointer)."""
    return {
        "start_seq": start_seq,
        "end_seq": end_seq,
        "text": s.text,
        "method": s.method,
        "token_count": s.token_count,
        "stand_in": stand_in,
    }


async def build(
    open_db: block_registry.OpenDb,
    session_row: SessionRow,
    loaded: Loaded,
    *,
    providers: Sequence[block_registry.BlockProvider],
    recall: RecallSource | None = None,
    as_of: datetime | None = None,
    query: str | None = None,
) -> Built:
    """Everything a context response needs, within the session's budget, from what
    `app.memory.aggregate.load` read. `open_db` opens a database session for
    the block providers that need one (see `app.context.blocks`); `recall`, when given
    and on, brings old turns back into what is left of the budget; `as_of` and `query`
    go to every block provider (the request's `facts_as_of`, the recall query)."""
    cfg = loaded.cfg
    fixed = loaded.state.rom_tokens + loaded.state.kernel_tokens + FORMAT_OVERHEAD_TOKENS
    if fixed > cfg.budget:
        raise OverBudget(
            f"ROM and Kernel alone ({fixed} tokens) exceed the budget "
            f"({cfg.budget}); raise max_context_tokens or shrink the Kernel."
        )
    first = fit(loaded.layers, cfg, loaded.stand_in_tokens, overhead_tokens=FORMAT_OVERHEAD_TOKENS)
    free = cfg.budget - first.total_tokens
    extra = (
        await block_registry.collect(
            open_db,
            session_row,
            free,
            providers,
            newest_user_with_text(loaded.l1),
            as_of=as_of,
            query=query,
        )
        if free > 0 and providers
        else []
    )
    layers, view = loaded.layers, first
    if extra:  # fit again with the blocks (without any, the first fit is the view)
        layers = replace(layers, blocks=tuple(BlockRecord(b.name, b.token_count) for b in extra))
        view = fit(layers, cfg, loaded.stand_in_tokens, overhead_tokens=FORMAT_OVERHEAD_TOKENS)
    kept_blocks = [b for b in extra if b.name not in set(view.dropped_blocks)]

    stored = {str(s.id): s for s in loaded.l2}
    summaries: list[dict[str, Any]] = []
    for rec in view.l2:
        if rec.stand_in:
            draft = loaded.stand_in([r for r in layers.l1 if rec.start_seq <= r.seq <= rec.end_seq])
            summaries.append(summary_dict(rec.start_seq, rec.end_seq, draft, stand_in=True))
        elif rec.key == GAP_KEY and loaded.gap is not None:
            g = loaded.gap
            summaries.append(summary_dict(g.start_seq, g.end_seq, g, stand_in=True))
        else:
            s = stored[str(rec.key)]
            summaries.append(summary_dict(s.start_seq, s.end_seq, s, stand_in=False))

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

    promoted_tokens = l1_tokens = 0
    for m in messages:
        if m["seq"] in promoted_seqs:
            promoted_tokens += tokens_of(m)
        else:
            l1_tokens += tokens_of(m)
    layer_tokens = {
        "rom": loaded.state.rom_tokens,
        "kernel": loaded.state.kernel_tokens,
        "facts": sum(b.token_count for b in kept_blocks if b.name == "facts"),
        "blocks": sum(b.token_count for b in kept_blocks if b.name != "facts"),
        "l2": sum(s["token_count"] for s in summaries),
        "promoted": promoted_tokens,
        "l1": l1_tokens,
        "overhead": FORMAT_OVERHEAD_TOKENS,
    }
    built = Built(
        loaded=loaded,
        view=view,
        blocks=kept_blocks,
        summaries=summaries,
        messages=messages,
        layer_tokens=layer_tokens,
    )
    if recall is not None and recall.config.enabled:
        free = cfg.budget - sum(layer_tokens.values())
        l1_shown = [m["seq"] for m in messages if m["seq"] not in promoted_seqs]
        found = await _recall(
            recall, loaded, {m["seq"] for m in messages}, min(l1_shown) if l1_shown else None, free
        )
        if found is not None:
            chosen, built.recall_query, recalled_rows = found
            built.recalled_rows = recalled_rows
            built.recalled = chosen
            built.recall_note = recall_note(chosen.seqs)
            layer_tokens["recalled"] = chosen.message_tokens + count_text(built.recall_note)
            # after the promoted messages, before L1
            at = sum(1 for m in messages if m["seq"] in promoted_seqs)
            messages[at:at] = [canonical(recalled_rows[s]) for s in chosen.seqs]
    return built


# --- replay: a recorded build reassembled (`app.manifests.replay`) ------------------------


def replayed_summary(
    start_seq: int,
    end_seq: int,
    *,
    stored: Any = None,
    stand_in_of: Sequence[StoredMessage] | None = None,
) -> dict[str, Any]:
    """An L2 entry as a build rendered it: the `stored` summary, the stand-in of the
    messages `stand_in_of` (their heuristic summary, as `Loaded.stand_in` made it), or, with
    neither, the pointer for messages not summarised yet (`gap_draft`)."""
    if stored is not None:
        return summary_dict(start_seq, end_seq, stored, stand_in=False)
    if stand_in_of is not None:
        draft = heuristic_summary([canonical(m) for m in stand_in_of])
    else:
        draft = gap_draft(start_seq, end_seq)
    return summary_dict(start_seq, end_seq, draft, stand_in=True)


def rebuilt(
    loaded: Loaded,
    *,
    budget: int,
    layer_tokens: dict[str, int],
    blocks: list[block_registry.ContextBlock],
    summaries: list[dict[str, Any]],
    promoted: Sequence[StoredMessage],
    l1: Sequence[tuple[StoredMessage, int | None]],
    recalled: Sequence[StoredMessage],
    scores: dict[int, float],
    query: str,
) -> Built:
    """The `Built` a recorded build made, from what it chose (its blocks, summaries, the
    promoted, L1 (each with the tokens it was cut to, if it was) and recalled messages, as
    they are now) rather than by choosing again: `build`'s other half, for a replay."""
    messages = []
    for m, cut in [*((m, None) for m in promoted), *l1]:
        msg = canonical(m)
        messages.append(truncate(msg, int(cut)) if cut is not None else msg)
    messages = _pair_tool_calls(messages)
    chosen = None
    note = ""
    if recalled:
        first = {m.seq for m in promoted}
        at = sum(1 for m in messages if m["seq"] in first)
        messages[at:at] = [canonical(m) for m in recalled]
        chosen = Recalled(
            seqs=tuple(m.seq for m in recalled),
            scores=scores,
            message_tokens=sum(int(m.token_count) for m in recalled),
        )
        note = recall_note(chosen.seqs)
    view = View(
        budget=budget,
        rom_tokens=loaded.state.rom_tokens,
        kernel_tokens=loaded.state.kernel_tokens,
        l2=[],
        promoted=[record(m) for m in promoted],
        l1=[],
        blocks=[],
    )
    return Built(
        loaded=replace(loaded, l1=[], l2=[], promoted=[], gap=None),
        view=view,
        blocks=blocks,
        summaries=summaries,
        messages=messages,
        layer_tokens=layer_tokens,
        recalled=chosen,
        recall_query=query,
        recall_note=note,
    )


def summary_text(summaries: list[dict[str, Any]]) -> str:
    if not summaries:
        return ""
    return "## Earlier conversation (summaries)\n" + "\n\n".join(s["text"] for s in summaries)


def filler_needed(messages: list[dict[str, Any]]) -> bool:
    first = next((m for m in messages if m["role"] != "system"), None)
    return first is not None and first["role"] != "user"


assert count_text(FILLER_TEXT) + 8 < FORMAT_OVERHEAD_TOKENS

"""Segmented-memory policy: what to compress, evict or snapshot. Pure Python, no I/O.

The service feeds this module *light records* (seq, role, token count, tool ids) of a
session's layers and persists whatever it decides; the context builder uses the same
decisions (see ``app.memory.fit``) so a built context always shows the state the policy
wants, even before a background job has written it.

Rules (SPEC section 3, seed memory-system-architecture.md):

* budget = ``max_context_tokens - reserved_output_tokens``; the default reserve is
  20,000 but never more than 10% of the window (small windows scale down).
* L1 holds at most ``l1_max_messages``; overflow summarises the oldest *exchanges*
  (a user text message and everything until the next one) into L2, FIFO.
* usage = memory tokens / budget; >= 0.70 / 0.80 / 0.85 compress the oldest 4 / 6 / 8
  L1 messages into one summary.
* a tool_use and all its results (parallel calls: one assistant message with N
  tool_use blocks, N results) form one *unit* that moves as a whole.
* the newest user text message (the turn being answered) and everything after it are
  *protected*: never summarised.  Because L1 must stay newer than everything L2
  summarises, only a prefix of L1 is ever compressed.
* L2 is append-only; when appending would push it past ``max_l2_tokens`` the old L2 is
  written to swap as a snapshot and cleared first.

Decisions where the spec is silent (also in README):

* ``max_l2_tokens`` defaults to 5,000 but, like the reserve, never more than 25% of the
  budget, so a small window is not crowded out by summaries.
* when the protected turn alone is longer than ``l1_max_messages`` the cap yields: the
  message being answered is never summarised away.
* a forced compression (``POST /memory/compress``) compresses at least the smallest
  threshold's count (4) even below 70% usage.
* a tool_use whose results never came (abandoned) closes its unit at the first message
  that carries none of its results; the builder strips such tool_use blocks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple

DEFAULT_MAX_CONTEXT_TOKENS = 200_000
DEFAULT_RESERVED_OUTPUT_TOKENS = 20_000
DEFAULT_L1_MAX_MESSAGES = 10
DEFAULT_MAX_L2_TOKENS = 5_000
DEFAULT_THRESHOLDS: tuple[tuple[float, int], ...] = ((0.85, 8), (0.80, 6), (0.70, 4))
DEFAULT_MAX_RANGE_MESSAGES = 20
# Smallest budget we accept: ROM + Kernel may take half of it and the protected turn
# must still fit once truncated to markers.
MIN_BUDGET_TOKENS = 256
# What a truncated message costs at least (marker text + per-message overhead).
TRUNCATION_FLOOR_TOKENS = 32

_TOKEN_COUNT = attrgetter("token_count")


def tokens(records: Iterable[Any]) -> int:
    """The tokens of records (messages, summaries, blocks: anything with `token_count`)."""
    return sum(map(_TOKEN_COUNT, records))


def default_reserve(max_context_tokens: int) -> int:
    """Default output reserve: 20,000, but never above 10% of the window."""
    return min(DEFAULT_RESERVED_OUTPUT_TOKENS, max_context_tokens // 10)


@dataclass(frozen=True)
class MemoryConfig:
    """Per-session memory knobs; ``None`` means "use the (scaled) default"."""

    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    reserved_output_tokens: int | None = None
    l1_max_messages: int = DEFAULT_L1_MAX_MESSAGES
    max_l2_tokens: int | None = None
    thresholds: tuple[tuple[float, int], ...] = DEFAULT_THRESHOLDS
    max_range_messages: int = DEFAULT_MAX_RANGE_MESSAGES

    # The keys of a session's stored config that this class reads (the rest, e.g.
    # `knowledge`, belongs to other domains).
    STORED_KEYS: ClassVar[tuple[str, ...]] = (
        "max_context_tokens",
        "reserved_output_tokens",
        "l1_max_messages",
        "max_l2_tokens",
    )

    @classmethod
    def from_stored(cls, config: dict[str, Any] | None) -> MemoryConfig:
        """The policy config of a session from its stored (already validated) config:
        absent or null keys take the defaults, scaled for small windows."""
        given = {k: config[k] for k in cls.STORED_KEYS if config and config.get(k) is not None}
        return cls(**given)

    # derived once, when made (plain attributes: a context build reads them many times)
    reserve: int = field(init=False, repr=False, compare=False)
    budget: int = field(init=False, repr=False, compare=False)
    l2_cap: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        reserve = self.reserved_output_tokens
        if reserve is None:
            reserve = default_reserve(self.max_context_tokens)
        budget = self.max_context_tokens - reserve
        l2_cap = self.max_l2_tokens
        if l2_cap is None:
            l2_cap = min(DEFAULT_MAX_L2_TOKENS, budget // 4)
        object.__setattr__(self, "reserve", reserve)
        object.__setattr__(self, "budget", budget)
        object.__setattr__(self, "l2_cap", l2_cap)

    def problems(self) -> list[str]:
        """Human-readable reasons this config is unusable (empty when valid)."""
        out: list[str] = []
        if self.reserve < 0:
            out.append("reserved_output_tokens must be >= 0")
        if self.budget < MIN_BUDGET_TOKENS:
            out.append(
                f"max_context_tokens - reserved_output_tokens must be >= {MIN_BUDGET_TOKENS}"
            )
        if self.l1_max_messages < 1:
            out.append("l1_max_messages must be >= 1")
        if self.l2_cap < 1:
            out.append("max_l2_tokens must be >= 1")
        if self.max_range_messages < 1:
            out.append("max_range_messages must be >= 1")
        return out


class MessageRecord(NamedTuple):
    """What the policy needs to know about one stored message. (A NamedTuple: a context
    build makes one per message shown, and a tuple is made in a quarter of the time of a
    frozen dataclass.)"""

    seq: int
    role: str
    token_count: int
    tool_use_ids: tuple[str, ...] = ()
    tool_result_ids: tuple[str, ...] = ()
    has_text: bool = True
    is_turn: bool = False
    min_tokens: int | None = None

    @property
    def is_user_text(self) -> bool:
        """A user message that starts a turn (not a bare tool-result carrier)."""
        return self.role == "user" and (self.has_text or not self.tool_result_ids)

    @property
    def floor(self) -> int:
        """Fewest tokens this message can be truncated to."""
        lowest = self.min_tokens if self.min_tokens is not None else TRUNCATION_FLOOR_TOKENS
        return min(self.token_count, lowest)


@dataclass(frozen=True)
class SummaryRecord:
    """An L2 summary (stored, or a stand-in computed for one request)."""

    start_seq: int
    end_seq: int
    token_count: int
    key: str | None = None
    stand_in: bool = False


@dataclass(frozen=True)
class BlockRecord:
    """An extra context block from a registered provider (knowledge, learned...)."""

    name: str
    token_count: int


@dataclass(frozen=True)
class Layers:
    """A session's layers as token counts and light records, oldest first."""

    rom_tokens: int = 0
    kernel_tokens: int = 0
    l2: tuple[SummaryRecord, ...] = ()
    promoted: tuple[MessageRecord, ...] = ()
    l1: tuple[MessageRecord, ...] = ()
    blocks: tuple[BlockRecord, ...] = ()

    @property
    def l2_tokens(self) -> int:
        return tokens(self.l2)

    @property
    def l1_tokens(self) -> int:
        return tokens(self.l1)

    @property
    def promoted_tokens(self) -> int:
        return tokens(self.promoted)

    @property
    def block_tokens(self) -> int:
        return tokens(self.blocks)

    @property
    def memory_tokens(self) -> int:
        """Tokens that drive compression: everything but provider blocks."""
        return (
            self.rom_tokens
            + self.kernel_tokens
            + self.l2_tokens
            + self.promoted_tokens
            + self.l1_tokens
        )

    @property
    def total_tokens(self) -> int:
        return self.memory_tokens + self.block_tokens


Unit = tuple[MessageRecord, ...]


def group_units(records: tuple[MessageRecord, ...] | list[MessageRecord]) -> list[Unit]:
    """Split messages (seq order) into atomic units: a tool_use message plus the
    immediately following messages that carry its results; any other message alone."""
    units: list[Unit] = []
    i, n = 0, len(records)
    while i < n:
        first = records[i]
        i += 1
        if not first.tool_use_ids:  # most messages: a unit of their own (no sets built)
            units.append((first,))
            continue
        unit = [first]
        pending = set(first.tool_use_ids) - set(first.tool_result_ids)
        while pending and i < n and pending & set(records[i].tool_result_ids):
            nxt = records[i]
            pending -= set(nxt.tool_result_ids)
            pending |= set(nxt.tool_use_ids)
            unit.append(nxt)
            i += 1
        units.append(tuple(unit))
    return units


def protected_start(units: list[Unit]) -> int:
    """Index of the first protected unit: the one holding the turn being answered (the
    newest unit marked `is_turn`, else the newest with a user text message)."""
    user_text = len(units)
    for i in range(len(units) - 1, -1, -1):
        for m in units[i]:
            if m.is_turn:
                return i
            if user_text == len(units) and m.is_user_text:
                user_text = i
    return user_text


def usage_of(layers: Layers, cfg: MemoryConfig) -> float:
    """Memory usage = memory tokens / budget (provider blocks excluded)."""
    return layers.memory_tokens / cfg.budget


@dataclass(frozen=True)
class PlannedRange:
    """A run of consecutive L1 messages to turn into one summary."""

    start_seq: int
    end_seq: int
    seqs: tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    """What one compression round does; ``ranges`` are a prefix of L1, oldest first."""

    ranges: tuple[PlannedRange, ...]
    snapshot_l2: bool
    usage: float
    triggers: tuple[str, ...] = field(default=())

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(s for r in self.ranges for s in r.seqs)


def _threshold_count(usage: float, cfg: MemoryConfig) -> int:
    for level, count in sorted(cfg.thresholds, reverse=True):
        if usage >= level:
            return count
    return 0


def _overflow_prefix(units: list[Unit], limit: int, excess: int) -> int:
    """Units to evict so ``excess`` messages leave L1, taken in whole exchanges."""
    if excess <= 0:
        return 0
    taken, k = 0, 0
    while k < limit and taken < excess:
        # one exchange: this unit and following units up to the next user text message
        taken += len(units[k])
        k += 1
        while k < limit and not any(m.is_user_text for m in units[k]):
            taken += len(units[k])
            k += 1
    return k


def _count_prefix(units: list[Unit], limit: int, count: int) -> int:
    """Fewest whole units from the front holding at least ``count`` messages."""
    taken, k = 0, 0
    while k < limit and taken < count:
        taken += len(units[k])
        k += 1
    return k


def chunk_ranges(units: list[Unit], max_messages: int) -> tuple[PlannedRange, ...]:
    """Greedy split of consecutive units into ranges of at most ``max_messages``
    messages (a single larger unit forms its own range: units are never split)."""
    ranges: list[PlannedRange] = []
    current: list[MessageRecord] = []
    for unit in units:
        if current and len(current) + len(unit) > max_messages:
            ranges.append(_range_of(current))
            current = []
        current.extend(unit)
    if current:
        ranges.append(_range_of(current))
    return tuple(ranges)


def _range_of(records: list[MessageRecord]) -> PlannedRange:
    seqs = tuple(m.seq for m in records)
    return PlannedRange(start_seq=seqs[0], end_seq=seqs[-1], seqs=seqs)


def plan(layers: Layers, cfg: MemoryConfig, *, force: bool = False) -> Plan | None:
    """Decide one compression round for ``layers``; ``None`` when nothing is due."""
    units = group_units(layers.l1)
    limit = protected_start(units)
    usage = usage_of(layers, cfg)
    triggers: list[str] = []

    k_overflow = _overflow_prefix(units, limit, len(layers.l1) - cfg.l1_max_messages)
    if k_overflow:
        triggers.append("l1_overflow")
    wanted = _threshold_count(usage, cfg)
    if wanted:
        triggers.append(f"usage>={_level_for(usage, cfg):.2f}")
    if force:
        wanted = max(wanted, min(c for _, c in cfg.thresholds))
        triggers.append("forced")
    k_threshold = _count_prefix(units, limit, wanted)
    k = max(k_overflow, k_threshold)

    ranges = chunk_ranges(units[:k], cfg.max_range_messages) if k else ()
    snapshot = layers.l2_tokens > cfg.l2_cap
    if snapshot:
        triggers.append("l2_over_cap")
    if not ranges and not snapshot:
        return None
    return Plan(ranges=ranges, snapshot_l2=snapshot, usage=usage, triggers=tuple(triggers))


def _level_for(usage: float, cfg: MemoryConfig) -> float:
    return max(level for level, _ in cfg.thresholds if usage >= level)


@dataclass(frozen=True)
class Applied:
    """Result of applying a plan: the new layers and the L2 contents sent to swap."""

    layers: Layers
    snapshots: tuple[tuple[SummaryRecord, ...], ...]


def apply_plan(
    layers: Layers, plan_: Plan, summaries: list[SummaryRecord], cfg: MemoryConfig
) -> Applied:
    """Move the plan's messages out of L1 and append ``summaries`` (one per range) to L2,
    snapshotting L2 first when it is over its cap or the new summaries would push it
    over. Raises ``ValueError`` if the plan is not a prefix of L1 (stale plan)."""
    covered = plan_.seqs
    l1_seqs = tuple(m.seq for m in layers.l1[: len(covered)])
    if l1_seqs != covered:
        raise ValueError("plan does not match the oldest L1 messages")
    if len(summaries) != len(plan_.ranges):
        raise ValueError("one summary per planned range is required")

    snapshots: list[tuple[SummaryRecord, ...]] = []
    l2 = list(layers.l2)
    new_tokens = sum(s.token_count for s in summaries)
    if l2 and (plan_.snapshot_l2 or layers.l2_tokens + new_tokens > cfg.l2_cap):
        snapshots.append(tuple(l2))
        l2 = []
    l2.extend(summaries)
    if sum(s.token_count for s in l2) > cfg.l2_cap:
        snapshots.append(tuple(l2))
        l2 = []
    new_layers = Layers(
        rom_tokens=layers.rom_tokens,
        kernel_tokens=layers.kernel_tokens,
        l2=tuple(l2),
        promoted=layers.promoted,
        l1=layers.l1[len(covered) :],
        blocks=layers.blocks,
    )
    return Applied(layers=new_layers, snapshots=tuple(snapshots))


def promotion_fits(layers: Layers, cfg: MemoryConfig, extra_tokens: int) -> bool:
    """Whether adding ``extra_tokens`` of promoted messages keeps memory within budget."""
    return layers.memory_tokens + extra_tokens <= cfg.budget

"""Durable facts: the rules, with no I/O.

- `FactsConfig`: a session's (or agent profile's) `facts` settings.
- `check_candidates` / `plan_operations`: the model's two answers turned into a list of
  operations, or `FactOutputError` when anything in them is unusable (a seq outside the
  batch, a decision for an unknown candidate, an id that was not shown, a candidate
  decided twice or never). One bad decision rejects the whole answer: a job writes all of
  a batch or nothing. Candidates are numbered in time order (`time_order`) and operations
  apply in that order; a candidate may target an earlier candidate of its batch
  (`new-<j>`, j smaller), so a batch holding "lives in Paris" then "moved to Berlin"
  records both, as two batches would. Two candidates may target the same stored fact (a
  preference changed twice): the later one applies to the fact as the earlier one left it.
- `choose_for_context`: which facts fit the context's share, best match first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

DEFAULT_SHARE = 0.05
MAX_SHARE = 0.5
DEFAULT_MIN_BATCH = 6  # LOOM_FACTS_EVERY_MESSAGES's default
MAX_MIN_BATCH = 10_000
# Stored facts found by text per candidate for the decision prompt (it is then filled to
# its budget with the rest).
NEIGHBOURS = 40
NEW_PREFIX = "new-"  # a decision's target naming an earlier candidate of the same batch
# Below this many tokens the facts block could not hold its header and one fact.
MIN_FACTS_TOKENS = 16
FACT_KIND = "fact"


# --- keys: subject, related attributes, one value at a time -----------------

# attributes that name the same thing in other words: a candidate's key and a stored key
# of the same subject in one family are related (the decision prompt shows them first)
ATTRIBUTE_FAMILIES: tuple[frozenset[str], ...] = (
    frozenset(
        "home city location address residence live lives living based town country "
        "hometown home_city home_town current_city reside resides moved move".split()
    ),
    frozenset(
        "job work occupation employer profession role company title career works "
        "workplace position employed working".split()
    ),
    frozenset("diet food eating eat eats vegetarian vegan meals".split()),
    frozenset("partner spouse wife husband relationship girlfriend boyfriend married".split()),
    frozenset("drink coffee tea beverage morning_drink".split()),
)
# keys whose last segment is one of these hold one value at a time when the model does
# not say (`holds_one_value`): a person lives in one city, has one employer, one diet
ONE_VALUE_ATTRIBUTES = frozenset(
    "home_city city location address residence hometown home_town current_city employer "
    "job occupation profession diet relationship_status partner spouse age "
    "morning_drink timezone nationality".split()
)
_GENERIC = frozenset({"name", "the", "of", "user", "current", "favourite", "favorite"})


def key_subject(key: str | None) -> str | None:
    """`user.home_city` -> `user`; `user.sister.home_city` -> `user.sister`."""
    if not key or "." not in key:
        return None
    return key.rsplit(".", 1)[0]


def _attribute_words(key: str) -> set[str]:
    attr = key.rsplit(".", 1)[-1]
    return {attr, *attr.split("_")} - _GENERIC - {""}


def related_keys(a: str | None, b: str | None) -> bool:
    """Same subject, and attributes that share a word or an `ATTRIBUTE_FAMILIES` family
    (`user.home_city` ~ `user.location`; not `user.sister.home_city`)."""
    if not a or not b or a == b or key_subject(a) != key_subject(b) or key_subject(a) is None:
        return False
    wa, wb = _attribute_words(a), _attribute_words(b)
    if wa & wb:
        return True
    return any(wa & f and wb & f for f in ATTRIBUTE_FAMILIES)


_WORD = re.compile(r"[a-z0-9]+")
_OTHER_SUBJECT = re.compile(r"\buser's\b")


def words_of(text: str) -> set[str]:
    """Lowercase words and their plain stems (`lives` -> `live`, `moved` -> `move`)."""
    out: set[str] = set()
    for w in _WORD.findall(text.lower()):
        out.add(w)
        for suffix in ("ing", "es", "ed", "s", "d"):
            if len(w) > len(suffix) + 2 and w.endswith(suffix):
                out.add(w[: -len(suffix)])
    return out


def _matches(query: set[str], attribute: set[str]) -> bool:
    if query & attribute:
        return True
    return any(query & f and attribute & f for f in ATTRIBUTE_FAMILIES)


def key_matches_query(key: str | None, query: set[str]) -> bool:
    """The key's attribute is what the query asks about (a word, or one family: "where do
    I live" ~ `user.home_city`)."""
    return bool(key) and _matches(query, _attribute_words(str(key)) | {str(key).rsplit(".", 1)[-1]})


def context_tier(key: str | None, text: str, query: set[str], score: float) -> int:
    """How a fact answers the context's query ("where do I live?"
    must bring the current home, not 50 facts sharing the word "live"): 0 its key's
    attribute is asked about and its subject is the user (or named in the query); 1 the
    attribute of another subject, or the text's words in the query's family; 2 a text
    match (BM25 score > 0); 3 the rest. Ranked by tier, then score, then importance."""
    subject = key_subject(key)
    if key_matches_query(key, query):
        named = subject is not None and subject.rsplit(".", 1)[-1] in query
        # an attribute key of the user's named without `user.` (residence.city)
        users = not key_person(key) and not _OTHER_SUBJECT.search(text.lower())
        return 0 if subject == "user" or named or users else 1
    if _matches(query, words_of(text)) and not _OTHER_SUBJECT.search(text.lower()):
        return 1
    return 2 if score > 0 else 3


def holds_one_value(key: str | None, said: bool | None = None) -> bool:
    """Whether a key holds one value at a time (two current facts of it cannot both be
    true): as the model said for the fact, else when its attribute is one of
    `ONE_VALUE_ATTRIBUTES`."""
    if said is not None:
        return said
    if not key:
        return False
    return key.rsplit(".", 1)[-1] in ONE_VALUE_ATTRIBUTES


def successions(facts: Sequence[tuple[Any, datetime, datetime | None]]) -> list[tuple[Any, Any]]:
    """Current facts of one single-value key, (id, valid_from, stated_at): (older, newer)
    pairs in time order, each fact replaced by the next (the later fact supersedes)."""
    ordered = sorted(facts, key=lambda f: (f[1], f[2] or f[1], str(f[0])))
    return [(a[0], b[0]) for a, b in zip(ordered, ordered[1:], strict=False)]


# --- attributes: one attribute, one truth -----------------------------------

# words that name another person (or animal) than the user in a key or a fact's text: a
# key naming one is about that subject (`user.sister.home_city`, `user.friend_lurel.job`)
RELATIONS = frozenset(
    "friend friends sister brother mother father mom mum dad son daughter wife husband "
    "partner cousin aunt uncle colleague coworker boss manager neighbour neighbor "
    "grandmother grandfather grandma grandpa niece nephew child children kid kids parent "
    "parents pet dog cat roommate flatmate girlfriend boyfriend fiance fiancee".split()
)
_RELATION_TEXT = re.compile(r"^\s*the user'?s\s+([a-z]+)(?:\s+([A-Z][a-z]+))?", re.I)


def key_person(key: str | None) -> tuple[str, ...]:
    """Who a key is about beyond the user: its subject's segments from the first one
    naming a relation (`user.sister.home_city` -> ("sister",); `user.friend_lurel.job` ->
    ("friend_lurel",); `user.home_city`, `residence.city` -> ())."""
    if not key:
        return ()
    segments = key.split(".")[:-1]
    for i, seg in enumerate(segments):
        if set(seg.split("_")) & RELATIONS:
            return tuple(segments[i:])
    return ()


def attribute_words(key: str | None) -> set[str]:
    """The words naming a key's attribute: every segment but `user` and the person's
    (`residence.city` -> {residence, city}; `user.food.diet` -> {food, diet})."""
    if not key:
        return set()
    segments = key.split(".")
    person = key_person(key)
    words: set[str] = set()
    for seg in segments:
        if seg == "user" or seg in person:
            continue
        words |= {seg, *seg.split("_")}
    return words - _GENERIC - {""}


def family_related(a: str | None, b: str | None) -> bool:
    """Two keys that may name one attribute of one subject (`user.residence`,
    `residence.city`, `home_city` are one home): the same person, and attribute words
    that share a word or an `ATTRIBUTE_FAMILIES` family. The decision step is shown the
    current facts of such keys; whether they are one attribute is the model's to say."""
    if not a or not b or key_person(a) != key_person(b):
        return False
    if a == b:
        return True
    wa, wb = attribute_words(a), attribute_words(b)
    if not wa or not wb:
        return False
    return bool(wa & wb) or any(wa & f and wb & f for f in ATTRIBUTE_FAMILIES)


def may_alias(a: str | None, b: str | None) -> bool:
    """Whether a decision joining facts of keys `a` and `b` may teach that they name one
    attribute: never across subjects (a friend's job is not the user's)."""
    return bool(a) and bool(b) and a != b and key_person(a) == key_person(b)


def attributes(
    keys: Sequence[tuple[str, Any]], joined: Sequence[tuple[str, str]]
) -> dict[str, str]:
    """key -> its attribute's canonical key. `keys`: the scope's keys with when
    each was first used; `joined`: pairs of keys the model's decisions (an UPDATE or
    INVALIDATE naming a fact of another key) or a rewrite joined. Keys joined directly or
    through others form one attribute, named by its first-used key; a pair across subjects
    (`may_alias`) joins nothing. Keys joined to nothing are their own attribute."""
    first = {k: t for k, t in keys}
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.get(k, k) != k:
            parent[k] = parent.get(parent[k], parent[k])
            k = parent[k]
        return k

    def rank(k: str) -> tuple[int, Any, str]:
        t = first.get(k)
        return (t is None, t if t is not None else 0, k)

    for a, b in joined:
        if not may_alias(a, b):
            continue
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        keep, other = (ra, rb) if rank(ra) <= rank(rb) else (rb, ra)
        parent[other] = keep
    return {k: find(k) for k in {*first, *parent} if find(k) != k}


def subject_from_text(key: str, text: str) -> str:
    """A repaired key put under the subject the fact's text names ("The user's
    occupation" given for "The user's friend Lurel is an actor" is the friend's job, never
    `user.occupation`): a `user.<attribute>` key of a text about "the user's <relation>
    [Name]" becomes `user.<relation>[_name].<attribute>`. Other keys are kept."""
    segments = key.split(".")
    if segments[0] != "user" or key_person(key):
        return key
    m = _RELATION_TEXT.match(text)
    if not m or m.group(1).lower() not in RELATIONS:
        return key
    person = m.group(1).lower() + (f"_{m.group(2).lower()}" if m.group(2) else "")
    return ".".join([segments[0], person, *segments[1:]])


def same_text(a: str | None, b: str | None) -> bool:
    """The same statement, up to case, spacing and a final full stop."""

    def norm(t: str | None) -> str:
        return " ".join((t or "").lower().split()).rstrip(".")

    return norm(a) == norm(b)


class FactOutputError(ValueError):
    """The model's answer cannot be applied; nothing of it is written."""


@dataclass(frozen=True, slots=True)
class FactsConfig:
    """`enabled`, the `scope` facts are kept in (`agent`, `global`, `task/<id>`,
    `project/<id>`), the context `share`, and `min_batch` (new messages that start an
    extraction at once; None: `LOOM_FACTS_EVERY_MESSAGES`)."""

    enabled: bool = False
    scope: str = "agent"
    share: float = DEFAULT_SHARE
    min_batch: int | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.share) and 0 <= self.share <= MAX_SHARE):
            raise ValueError(f"share must be in [0, {MAX_SHARE}]")
        if self.min_batch is not None and not 1 <= self.min_batch <= MAX_MIN_BATCH:
            raise ValueError(f"min_batch must be between 1 and {MAX_MIN_BATCH}")

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any] | None) -> FactsConfig:
        """From a validated config object (`FactsInput` dumped); None: off."""
        if not stored:
            return cls()
        return cls(
            enabled=bool(stored.get("enabled", False)),
            scope=str(stored.get("scope") or "agent"),
            share=float(stored.get("share", DEFAULT_SHARE)),
            min_batch=int(stored["min_batch"]) if stored.get("min_batch") else None,
        )

    def every(self, default: int) -> int:
        """New messages that start an extraction at once."""
        return self.min_batch or default

    def tokens(self, budget: int, free: int) -> int:
        """Tokens the facts block may use: its share of the budget, within what is free."""
        if not self.enabled:
            return 0
        return max(0, min(free, int(budget * self.share)))


def check_candidates(candidates: Sequence[Any], batch_seqs: set[int]) -> None:
    """Every candidate names only seqs of the batch (else `FactOutputError`)."""
    for i, c in enumerate(candidates):
        outside = sorted(set(c.source_seqs) - batch_seqs)
        if outside:
            raise FactOutputError(f"fact {i} names msg {outside[0]}, outside the batch")
        if not c.text.strip():
            raise FactOutputError(f"fact {i} is empty")


OpName = Literal["add", "update", "invalidate", "confirm"]


@dataclass(frozen=True, slots=True)
class Operation:
    """One change: `add` the candidate; `update` target's text (to `text`); `invalidate`
    target and add the candidate as its successor; `confirm` (a NONE naming the fact that
    already says it): the candidate's messages join the target's provenance. `target` is
    a stored fact's id or `new-<j>` (candidate j of the batch)."""

    op: OpName
    candidate: int
    target: str | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    operations: tuple[Operation, ...] = ()
    unchanged: int = 0  # NONE decisions (with or without a target)

    @property
    def counts(self) -> dict[str, int]:
        out = {"add": 0, "update": 0, "invalidate": 0, "none": self.unchanged}
        for o in self.operations:
            if o.op != "confirm":
                out[o.op] += 1
        return out


def earlier_candidate(target: str, i: int) -> int | None:
    """j of a `new-<j>` target when j < i, else None."""
    if not target.startswith(NEW_PREFIX):
        return None
    raw = target[len(NEW_PREFIX) :]
    if not raw.isdigit() or int(raw) >= i:
        return None
    return int(raw)


def plan_operations(decisions: Sequence[Any], n_candidates: int, shown: Sequence[set[str]]) -> Plan:
    """The decisions as operations, checked against what was asked (see module doc):
    `shown[i]` holds the stored ids shown to candidate i; `new-<j>` (j < i) names an
    earlier candidate of the batch."""
    seen: set[int] = set()
    ops: list[Operation] = []
    unchanged = 0
    for d in decisions:
        i = d.candidate
        if not 0 <= i < n_candidates:
            raise FactOutputError(f"decision for unknown fact {i}")
        if i in seen:
            raise FactOutputError(f"fact {i} decided twice")
        seen.add(i)
        target = (d.target_id or "").strip().lower()
        known = target in shown[i] or earlier_candidate(target, i) is not None
        if d.op == "NONE":
            unchanged += 1
            if target and known:
                ops.append(Operation("confirm", i, target))
            continue
        if d.op == "ADD":
            ops.append(Operation("add", i))
            continue
        if not known:
            raise FactOutputError(
                f"{d.op} of fact {i} names id {d.target_id!r}, which was not shown with it"
            )
        if d.op == "UPDATE":
            if not (d.text or "").strip():
                raise FactOutputError(f"UPDATE of fact {i} gives no text")
            ops.append(Operation("update", i, target, d.text.strip()))
        elif d.op == "INVALIDATE":
            ops.append(Operation("invalidate", i, target))
        else:  # pragma: no cover  (the schema allows only the four)
            raise FactOutputError(f"unknown operation {d.op!r}")
    missing = sorted(set(range(n_candidates)) - seen)
    if missing:
        raise FactOutputError(f"no decision for fact {missing[0]}")
    return Plan(tuple(sorted(ops, key=lambda o: o.candidate)), unchanged)


@dataclass(frozen=True, slots=True)
class FactLine:
    """A stored fact offered to the context: its id, rendered line and its tokens."""

    id: Any
    line: str
    tokens: int


@dataclass(frozen=True, slots=True)
class ChosenFacts:
    lines: tuple[FactLine, ...] = ()
    tokens: int = 0  # header + lines
    ids: tuple[Any, ...] = field(default=())


def choose_for_context(
    ranked: Sequence[FactLine], tokens: int, header_tokens: int, join_tokens: int = 1
) -> ChosenFacts:
    """The facts (best first) whose lines, with the header and one separator per line,
    fit `tokens`; one that does not fit is skipped and the next ones are still tried.
    Nothing (not even the header) when no fact fits."""
    used = header_tokens
    chosen: list[FactLine] = []
    for f in ranked:
        cost = f.tokens + join_tokens
        if used + cost <= tokens:
            chosen.append(f)
            used += cost
    if not chosen:
        return ChosenFacts()
    return ChosenFacts(tuple(chosen), used, tuple(f.id for f in chosen))


def when_known(
    valid_from: datetime | None,
    stated_at: datetime | None,
    created_at: datetime | None,
    *,
    replaced: bool,
) -> str:
    """What a context line says about a fact's time: "since" only
    when it is known when the fact became true: an event time (`valid_from` differs from
    when it was said: the model resolved it, or a person set it) or a change the memory
    observed (the fact replaced another); otherwise only when it was said ("The user was
    born in Lyon" is not true since the day it was said)."""
    said = stated_at or created_at
    if valid_from is not None and (replaced or said is None or valid_from != said):
        return f"since {valid_from:%Y-%m-%d}"
    if said is not None:
        return f"said {said:%Y-%m-%d}"
    return ""


def render_block(header: str, lines: Sequence[str]) -> str:
    """The context block: the header, then one fact per line."""
    return "\n".join([header, *(f"- {line}" for line in lines)])


def fit_text(
    header: str, lines: Sequence[str], tokens: int, count: Callable[[str], int]
) -> tuple[str, int] | None:
    """The block re-counted as a whole, dropping the last lines until it fits (a join
    can cost a token more than the parts)."""
    kept = list(lines)
    while kept:
        text = render_block(header, kept)
        n = count(text)
        if n <= tokens:
            return text, n
        kept.pop()
    return None

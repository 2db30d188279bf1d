"""Repairing the model's step-1 answer, with no I/O.

One malformed field used to fail a whole batch (schema validation of the whole answer): a
key such as `user.favourite-food` or a sentence cost every good fact of the batch after
its retries. Now each candidate is repaired where it can be (`repair_key`: lowercase,
invalid characters to `_`, segments and length cut to the pattern, a sentence naming the
user first split into subject and attribute: "The user's home city" -> `user.home_city`;
an event time that is not a date is left out; importance clamped; seqs outside the
batch left out) and only a candidate that cannot be (no text, no key left, no seq of the
batch) is dropped and counted. An answer whose every candidate is dropped is still bad
output (retried): the model did not answer the question.
"""

from __future__ import annotations

import math
import re
from collections.abc import Set
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from app.facts.policy import FactOutputError, subject_from_text
from app.facts.prompts import (
    EVENT_TIME_PATTERN,
    KEY_PATTERN,
    MAX_CANDIDATES,
    MAX_FACT_CHARS,
    CandidateFact,
)

KEY_SEGMENT_CHARS = 60
KEY_SEGMENTS = 5
KEY_CHARS = 200
DEFAULT_IMPORTANCE = 0.5
_KEY = re.compile(KEY_PATTERN)
_EVENT = re.compile(EVENT_TIME_PATTERN)
_INVALID = re.compile(r"[^a-z0-9_]+")
# a one-segment key naming its subject first ("the_user_s_home_city", "user_home_city")
_SUBJECT = re.compile(r"^(?:the_)?(user)(?:_s)?_(.+)$")


def repair_key(raw: Any) -> str | None:
    """The key made to fit `KEY_PATTERN` (subject.attribute, lowercase, `[a-z0-9_]`), or
    None when nothing is left of it. A valid key is returned as it is."""
    if not isinstance(raw, str):
        return None
    if _KEY.match(raw) and len(raw) <= KEY_CHARS:
        return raw
    segments = []
    for part in raw.strip().lower().split("."):
        seg = _INVALID.sub("_", part).strip("_")
        seg = re.sub(r"_+", "_", seg)[:KEY_SEGMENT_CHARS].strip("_")
        if seg:
            segments.append(seg)
    if not segments:
        return None
    if len(segments) == 1:  # a sentence: "The user's home city" -> user.home_city
        m = _SUBJECT.match(segments[0])
        if m and m.group(2):
            segments = [m.group(1), m.group(2)[:KEY_SEGMENT_CHARS].strip("_")]
    if len(segments) > KEY_SEGMENTS:  # the last ones joined into the fifth
        tail = "_".join(segments[KEY_SEGMENTS - 1 :])[:KEY_SEGMENT_CHARS].strip("_")
        segments = [*segments[: KEY_SEGMENTS - 1], tail]
    key = ".".join(segments)
    while len(key) > KEY_CHARS and len(segments) > 1:
        segments.pop()
        key = ".".join(segments)
    return key if _KEY.match(key) and len(key) <= KEY_CHARS else None


@dataclass(frozen=True, slots=True)
class Salvaged:
    facts: list[CandidateFact]
    dropped: int = 0
    repaired: int = 0
    reasons: tuple[str, ...] = ()


def _importance(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        return DEFAULT_IMPORTANCE
    return min(1.0, max(0.0, float(raw)))


def _tags(raw: Any) -> list[str]:
    if not isinstance(raw, list):
        return []
    out = [t.strip().lower()[:100] for t in raw if isinstance(t, str) and t.strip()]
    return list(dict.fromkeys(out))[:10]


def _one(i: int, raw: Any, batch_seqs: Set[int]) -> tuple[CandidateFact | None, bool, str]:
    """A candidate repaired (with whether anything was changed), or None and why not."""
    if not isinstance(raw, dict):
        return None, False, f"fact {i} does not match the schema (not an object)"
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        return None, False, f"fact {i} does not match the schema (text: empty)"
    key = repair_key(raw.get("key"))
    if key is None:
        return None, False, f"fact {i} does not match the schema (key: {raw.get('key')!r})"
    if key != raw.get("key"):  # a repair never moves a fact to another subject
        moved = subject_from_text(key, text)
        key = moved if _KEY.match(moved) and len(moved) <= KEY_CHARS else key
    seqs_raw = raw.get("source_seqs")
    seqs = (
        [s for s in seqs_raw if isinstance(s, int) and not isinstance(s, bool)]
        if isinstance(seqs_raw, list)
        else []
    )
    inside = sorted({s for s in seqs if s in batch_seqs})
    if not inside:
        if seqs:
            return None, False, f"fact {i} names msg {seqs[0]}, outside the batch"
        return None, False, f"fact {i} does not match the schema (source_seqs: none)"
    when = raw.get("valid_from")
    if when is not None and not (isinstance(when, str) and _EVENT.match(when.strip())):
        when = None
    fixed = {
        "text": text.strip()[:MAX_FACT_CHARS],
        "key": key,
        "importance": _importance(raw.get("importance")),
        "tags": _tags(raw.get("tags")),
        "source_seqs": inside[:50],
    }
    if isinstance(when, str):
        fixed["valid_from"] = when.strip()
    if isinstance(raw.get("one_value"), bool):
        fixed["one_value"] = raw["one_value"]
    try:
        fact = CandidateFact.model_validate(fixed)
    except (ValidationError, ValueError) as exc:  # pragma: no cover  (repaired above)
        return None, False, f"fact {i} does not match the schema ({exc})"
    changed = key != raw.get("key") or (raw.get("valid_from") is not None and when is None)
    return fact, changed, ""


def salvage_candidates(data: Any, batch_seqs: Set[int]) -> Salvaged:
    """The answer's candidates, each repaired or dropped (module doc). Raises
    `FactOutputError` when the answer has no list of facts, or when it has some and every
    one was dropped."""
    facts = data.get("facts") if isinstance(data, dict) else None
    if not isinstance(facts, list):
        raise FactOutputError("extract: the answer does not match the schema (facts: not a list)")
    kept: list[CandidateFact] = []
    reasons: list[str] = []
    repaired = 0
    for i, raw in enumerate(facts[:MAX_CANDIDATES]):
        fact, changed, why = _one(i, raw, batch_seqs)
        if fact is None:
            reasons.append(why)
            continue
        kept.append(fact)
        repaired += int(changed)
    dropped = len(facts) - len(kept)
    if facts and not kept:
        raise FactOutputError(f"extract: no usable fact in the answer ({reasons[0]})")
    return Salvaged(kept, dropped, repaired, tuple(reasons))

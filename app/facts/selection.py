"""What the extraction prompts show, within `LOOM_FACTS_INPUT_TOKENS`
counted on the rendered prompt: the messages of a batch (`fit_batch`), the scope's keys in
use and the aliases its decisions taught (`key_vocabulary`) and the stored facts bearing on
them for step 1 (`known_facts`), and the stored facts a decision is shown
(`stored_for_decision`): every current fact that could conflict with a
candidate, found from all facts of the scope whatever its size (no importance cut), in
tiers, each taken while the prompt fits: the current facts of the candidate's attribute
(its key and the keys learned as its aliases: at most `SAME_KEY_SHOWN` of a key holding
several values, those sharing the candidate's words first, so books read cannot crowd out
the rest), then those of keys of the same subject and attribute family, then its best
BM25 matches over the scope's current facts. The rendered prompt is measured and never
exceeds the cap."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
from pydantic import BaseModel

from app.core.tokens import count_text
from app.facts import prompts
from app.facts import repository as repo
from app.facts import state as runs
from app.facts.apply import Candidate
from app.facts.policy import (
    attribute_words,
    family_related,
    holds_one_value,
    key_person,
    same_text,
    words_of,
)
from app.knowledge.scopes import Scope

CHARS_PER_TOKEN = 4
KNOWN_SHARE = 0.25  # of the cap: stored facts shown in step 1
KEYS_SHARE = 0.05  # of the cap: the scope's attributes in use shown in step 1 (0.1)
SAME_KEY_SHOWN = 6  # current facts shown of a candidate's key that holds several values
FAMILY_SHOWN = 2  # ... of a related key that holds several values
FAMILY_KEYS = 8  # related keys shown per candidate
NEAR_SHOWN = 5  # best text matches shown per candidate
KEY_FACTS_READ = 2_000  # current facts of the candidates' keys read at most
_JOIN = 1  # tokens a line's newline may add


def fixed_tokens(system: str, model: type[BaseModel]) -> int:
    return count_text(system) + count_text(json.dumps(prompts.tool_schema(model)))


def _shown(
    rows: list[runs.BatchRow], agent_id: str, cap: int
) -> list[tuple[runs.BatchRow, prompts.BatchMessage]]:
    limit = cap * CHARS_PER_TOKEN
    return [
        (
            r,
            prompts.BatchMessage(
                r.seq, prompts.speaker(r.role, r.name, agent_id), r.created_at, r.text[:limit]
            ),
        )
        for r in rows
        if r.role in ("user", "assistant") and r.text.strip()
    ]


def fit_batch(
    rows: list[runs.BatchRow],
    agent_id: str,
    known: list[prompts.ShownFact],
    cap: int,
    keys: Sequence[tuple[str, int]] = (),
    aliases: Sequence[tuple[str, str]] = (),
) -> tuple[list[runs.BatchRow], list[prompts.BatchMessage]]:
    """The longest prefix of `rows` whose rendered step-1 prompt (system, tool schema,
    stored facts, messages) stays within `cap` tokens (at least one row; a message alone
    over the cap is cut)."""
    fixed = fixed_tokens(prompts.EXTRACT_SYSTEM, prompts.CandidatesOut)
    shown = _shown(rows, agent_id, cap)
    by_seq = {r.seq: m for r, m in shown}
    base = fixed + count_text(
        prompts.render_batch(
            [prompts.BatchMessage(0, "user", rows[0].created_at, "")], known, keys, aliases
        )
    )
    taken: list[runs.BatchRow] = []
    used = base
    for r in rows:
        m = by_seq.get(r.seq)
        cost = count_text(prompts.message_line(m)) + _JOIN if m is not None else 0
        if taken and used + cost > cap:
            break
        taken.append(r)
        used += cost
    messages = [by_seq[r.seq] for r in taken if r.seq in by_seq]
    if len(messages) == 1 and used > cap:  # one message alone: cut to what is left of the
        # cap, but never below a quarter of it (a cap smaller than the instructions would
        # otherwise leave nothing of the message to read)
        room = max(cap // 4, cap - base) * CHARS_PER_TOKEN
        m = messages[0]
        messages = [dataclasses.replace(m, text=m.text[:room])]
    return taken, messages


def shown_fact(r: Any) -> prompts.ShownFact:
    return prompts.ShownFact(str(r.id), r.text or "", r.valid_from, r.fact_key, r.stated_at)


async def known_facts(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    agent_id: str,
    rows: list[runs.BatchRow],
    cap: int,
) -> list[prompts.ShownFact]:
    """Stored facts bearing on the messages (best text matches), within KNOWN_SHARE of the
    cap, for step 1."""
    text = " ".join(r.text for r in rows if r.role == "user")[: cap * CHARS_PER_TOKEN]
    if not text.strip():
        return []
    # the index finds them without reading every fact that says "user"
    [found] = await repo.text_neighbours(conn, tenant_id, scope, [text], limit=50)
    out: list[prompts.ShownFact] = []
    used = 0
    for r in found:
        f = shown_fact(r)
        cost = count_text(prompts.stored_line(f, with_id=False)) + _JOIN
        if used + cost > cap * KNOWN_SHARE:
            break
        out.append(f)
        used += cost
    return out


def key_vocabulary(
    keys: Sequence[repo.KeyStat],
    attrs: Mapping[str, str],
    known: Sequence[prompts.ShownFact],
    cap: int,
) -> tuple[list[tuple[str, int]], list[tuple[str, str]]]:
    """The scope's attributes in use (canonical key, current facts of all its keys) and
    the aliases learned (alias, canonical key), within KEYS_SHARE of the cap: the keys of
    the facts bearing on the batch first, then the most used."""
    counts: dict[str, int] = {}
    for stat in keys:
        if stat.current:
            a = attrs.get(stat.key, stat.key)
            counts[a] = counts.get(a, 0) + stat.current
    first = {attrs.get(f.key, f.key) for f in known if f.key}
    # a key of one fact is shown when it bears on the batch or holds one value (a home, a
    # job); one-off keys (user.vinyl.r123) would fill the list at 2,000 facts
    ordered = sorted(
        (
            (k, n)
            for k, n in counts.items()
            if n > 1
            or k in first
            or (holds_one_value(k) and not key_person(k))  # the user's home, job...
            or k in set(attrs.values())
        ),
        key=lambda kc: (kc[0] not in first, -kc[1], kc[0]),
    )
    out: list[tuple[str, int]] = []
    aliases: list[tuple[str, str]] = []
    by_attr: dict[str, list[str]] = {}
    for alias, attr in sorted(attrs.items()):
        by_attr.setdefault(attr, []).append(alias)
    used = 0
    for k, n in ordered:
        mine = [(a, k) for a in by_attr.get(k, [])]
        cost = count_text(prompts.key_line(k, n)) + _JOIN
        cost += sum(count_text(prompts.alias_line(a, b)) + _JOIN for a, b in mine)
        if used + cost > cap * KEYS_SHARE:
            break
        out.append((k, n))
        aliases += mine
        used += cost
    return out, aliases


def _overlap(a: set[str], text: str) -> int:
    return len(a & words_of(text))


def _pick(facts: Sequence[Any], c: Candidate, one_value: bool, many: int) -> list[Any]:
    """Of the current facts of one key: all when it holds one value; else the one saying
    the same and those sharing most words with the candidate, at most `many`."""
    if one_value:
        return list(facts)
    words = words_of(c.text)
    ranked = sorted(
        facts,
        key=lambda r: (not same_text(r.text, c.text), -_overlap(words, r.text or ""), str(r.id)),
    )
    return [r for r in ranked if same_text(r.text, c.text) or _overlap(words, r.text or "") > 1][
        :many
    ]


async def stored_for_decision(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    cands: Sequence[Candidate],
    budget: int,
    keys: Sequence[repo.KeyStat],
    attrs: Mapping[str, str],
) -> tuple[list[prompts.ShownFact], bool]:
    """The stored facts the decision prompt shows (module doc), and whether any could be
    affected: when none could, the decision call is skipped. `budget`: tokens left for
    the stored lines."""
    groups: dict[str, set[str]] = {}
    for k in keys:
        groups.setdefault(attrs.get(k.key, k.key), set()).add(k.key)
    all_keys = [k.key for k in keys if k.current]
    same: list[set[str]] = []
    family: list[set[str]] = []
    for c in cands:
        attr = attrs.get(c.key or "", c.key or "")
        mine = groups.get(attr, set()) | {attr}
        same.append(mine)
        related = [k for k in all_keys if k not in mine and any(family_related(k, g) for g in mine)]
        # the nearest first: fewest segments (user.location before user.penpal_3.home_city),
        # then the most attribute words shared; at most FAMILY_KEYS of them
        words = set().union(*(attribute_words(g) for g in mine))
        related.sort(key=lambda k: (k.count("."), -len(attribute_words(k) & words), k))
        family.append(set(related[:FAMILY_KEYS]))
    wanted = sorted(set().union(*same, *family))
    rows = await repo.current_of_keys(conn, tenant_id, scope, wanted, limit=KEY_FACTS_READ)
    by_key: dict[str | None, list[Any]] = {}  # keyed by fact_key (the wanted ones)
    for r in rows:
        by_key.setdefault(r.fact_key, []).append(r)
    near = await repo.text_neighbours(
        conn, tenant_id, scope, [c.text for c in cands], limit=NEAR_SHOWN
    )
    tiers: list[list[list[Any]]] = [[], [], []]
    for i, c in enumerate(cands):
        one = c.one_value or any(holds_one_value(k) for k in same[i])
        tiers[0].append(
            [r for k in sorted(same[i]) for r in _pick(by_key.get(k, []), c, one, SAME_KEY_SHOWN)]
        )
        tiers[1].append(
            [
                r
                for k in sorted(family[i])
                for r in _pick(by_key.get(k, []), c, holds_one_value(k), FAMILY_SHOWN)
            ]
        )
        tiers[2].append(list(near[i]) if i < len(near) else [])
    chosen: dict[str, prompts.ShownFact] = {}
    used = 0
    for tier in tiers:  # round-robin over the candidates within a tier
        depth = max((len(t) for t in tier), default=0)
        for j in range(depth):
            for t in tier:
                if j >= len(t) or str(t[j].id) in chosen:
                    continue
                f = shown_fact(t[j])
                cost = count_text(prompts.stored_line(f)) + _JOIN
                if used + cost <= budget:
                    chosen[f.id] = f
                    used += cost
    return list(chosen.values()), bool(chosen)


def decision_prompt(
    news: Sequence[prompts.NewFact], stored: list[prompts.ShownFact], cap: int
) -> tuple[str, list[prompts.ShownFact]]:
    """The rendered decision prompt and the facts it shows, measured whole: lines are
    dropped from the least related end until system, tool schema and prompt fit `cap`
    (the prompt never exceeds its budget)."""
    fixed = fixed_tokens(prompts.DECIDE_SYSTEM, prompts.DecisionsOut)
    shown = list(stored)
    while True:
        text = prompts.render_decisions(news, shown)
        if fixed + count_text(text) <= cap or not shown:
            return text, shown
        shown.pop()

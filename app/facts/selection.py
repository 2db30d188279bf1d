"""What the extraction prompts show (issues 27, 37), within `LOOM_FACTS_INPUT_TOKENS` counted
on the rendered prompt: the messages of a batch (`fit_batch`), the scope's keys in use
(`key_vocabulary`) and the stored facts bearing on them for step 1 (`known_facts`), and
the stored facts a decision is shown (`stored_for_decision`: filled to the budget, the
same key first, then the same subject's related attributes, then text matches without
the scope's stop words, then the rest; `app.knowledge.timeline.choose_shown`)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.tokens import count_text
from app.facts import prompts
from app.facts import repository as repo
from app.facts.apply import Candidate
from app.facts.policy import NEIGHBOURS, key_subject, related_keys
from app.knowledge.scopes import Scope
from app.knowledge.timeline import choose_shown

CHARS_PER_TOKEN = 4
KNOWN_SHARE = 0.25  # of the cap: stored facts shown in step 1
KEYS_SHARE = 0.1  # of the cap: the scope's keys in use shown in step 1
SCOPE_FACTS = 500  # stored facts read for the decision step at most
_JOIN = 1  # tokens a line's newline may add


def fixed_tokens(system: str, model: type[BaseModel]) -> int:
    return count_text(system) + count_text(json.dumps(prompts.tool_schema(model)))


def _shown(
    rows: list[repo.BatchRow], agent_id: str, cap: int
) -> list[tuple[repo.BatchRow, prompts.BatchMessage]]:
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
    rows: list[repo.BatchRow],
    agent_id: str,
    known: list[prompts.ShownFact],
    cap: int,
    keys: Sequence[tuple[str, int]] = (),
) -> tuple[list[repo.BatchRow], list[prompts.BatchMessage]]:
    """The longest prefix of `rows` whose rendered step-1 prompt (system, tool schema,
    stored facts, messages) stays within `cap` tokens (at least one row; a message alone
    over the cap is cut)."""
    fixed = fixed_tokens(prompts.EXTRACT_SYSTEM, prompts.CandidatesOut)
    shown = _shown(rows, agent_id, cap)
    by_seq = {r.seq: m for r, m in shown}
    base = fixed + count_text(
        prompts.render_batch([prompts.BatchMessage(0, "user", rows[0].created_at, "")], known, keys)
    )
    taken: list[repo.BatchRow] = []
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
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    agent_id: str,
    rows: list[repo.BatchRow],
    cap: int,
) -> list[prompts.ShownFact]:
    """Stored facts bearing on the messages (best text matches), within KNOWN_SHARE of the
    cap, for step 1."""
    text = " ".join(r.text for r in rows if r.role == "user")[: cap * CHARS_PER_TOKEN]
    if not text.strip():
        return []
    found = await repo.nearest_facts(
        db, tenant_id, scope, text, limit=50, agent_id=agent_id, drop_stop_words=True
    )
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


async def key_vocabulary(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    agent_id: str,
    known: Sequence[prompts.ShownFact],
    cap: int,
) -> list[tuple[str, int]]:
    """The scope's keys in use with their counts of valid facts, within KEYS_SHARE of the
    cap: the keys of the facts bearing on the batch first, then the most used."""
    counts = await repo.key_counts(db, tenant_id, scope, agent_id=agent_id, limit=500)
    first = {f.key for f in known if f.key}
    ordered = sorted(counts, key=lambda kc: (kc[0] not in first, -kc[1], kc[0]))
    out: list[tuple[str, int]] = []
    used = 0
    for k, n in ordered:
        cost = count_text(prompts.key_line(k, n)) + _JOIN
        if used + cost > cap * KEYS_SHARE:
            break
        out.append((k, n))
        used += cost
    return out


async def stored_for_decision(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    agent_id: str,
    cands: Sequence[Candidate],
    budget: int,
) -> tuple[list[prompts.ShownFact], bool]:
    """The stored facts the decision prompt shows (module doc), and whether any could be
    affected (a fact sharing a candidate's key, of a related attribute of its subject, or
    matching its words beyond the scope's stop words): when none could, the decision call
    is skipped."""
    every = await repo.top_facts(db, tenant_id, scope, limit=SCOPE_FACTS, agent_id=agent_id)
    facts = {str(r.id): shown_fact(r) for r in every}
    tokens = {i: count_text(prompts.stored_line(f)) + _JOIN for i, f in facts.items()}
    keys = {c.key for c in cands if c.key}
    subjects = {key_subject(k) for k in keys} - {None}
    same_key = [i for i, f in facts.items() if f.key in keys]
    related = [
        i
        for i, f in facts.items()
        if f.key not in keys and any(related_keys(f.key, k) for k in keys)
    ]
    subject = [
        i
        for i, f in facts.items()
        if f.key not in keys and i not in related and key_subject(f.key) in subjects
    ]
    ranked: list[list[str]] = []
    if facts:
        for c in cands:
            near = await repo.nearest_facts(
                db,
                tenant_id,
                scope,
                c.text,
                limit=NEIGHBOURS,
                agent_id=agent_id,
                drop_stop_words=True,
            )
            for r in near:
                facts.setdefault(str(r.id), shown_fact(r))
                tokens.setdefault(
                    str(r.id), count_text(prompts.stored_line(facts[str(r.id)])) + _JOIN
                )
            ranked.append([str(r.id) for r in near])
    affected = bool(same_key) or bool(related) or any(ranked)
    chosen = choose_shown(list(facts), tokens, budget, same_key, ranked, related, subject)
    return [facts[i] for i in chosen], affected

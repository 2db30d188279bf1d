"""Step 3 of a batch: the first call (`record_facts`) proposes candidate facts, repaired
where they can be (`app.facts.repair`), each key named by its attribute's canonical key
(the aliases the scope learned), put in time order, with the restatements later
in the batch split from their first statement."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from datetime import datetime

from app.facts import prompts
from app.facts import state as runs
from app.facts.apply import Candidate
from app.facts.batch import Batch
from app.facts.policy import check_candidates, holds_one_value, same_text
from app.facts.repair import Salvaged, salvage_candidates
from app.facts.run import Deps, Outcome
from app.facts.usage import ask
from app.knowledge.timeline import parse_event_time, time_order


@dataclasses.dataclass(frozen=True)
class Proposed:
    """The batch's candidates (first statements, time order), their restatements later
    in the batch (index into `candidates`, restatement), and the repair counts."""

    candidates: list[Candidate]
    restated: list[tuple[int, Candidate]]
    dropped: int = 0
    repaired: int = 0


def split_restatements(
    found: list[prompts.CandidateFact],
) -> tuple[list[prompts.CandidateFact], list[tuple[int, prompts.CandidateFact]]]:
    """The first statement of each fact, and its restatements later in the batch (index of
    the first, the restatement with only its new seqs), so that one batch records what ten
    would: the fact from its first statement, then a `confirm` per restatement; a
    restatement never moves `valid_from`. A repeated text after another state
    of its key ("Paris", "Berlin", "Paris" again) is a new statement, not a restatement."""
    order = sorted(range(len(found)), key=lambda i: (min(found[i].source_seqs), i))
    firsts: list[prompts.CandidateFact] = []
    again: list[tuple[int, prompts.CandidateFact]] = []
    by_text: dict[str, int] = {}
    last_of_key: dict[str, str] = {}
    for i in order:
        c = found[i]
        text = " ".join(c.text.lower().split()).rstrip(".")
        j = by_text.get(text)
        if j is not None and same_text(last_of_key.get(c.key, text), text):
            seen = set(firsts[j].source_seqs).union(
                *(set(x.source_seqs) for k, x in again if k == j)
            )
            new = sorted(set(c.source_seqs) - seen)
            if new:
                again.append((j, c.model_copy(update={"source_seqs": new})))
        else:
            by_text[text] = len(firsts)
            firsts.append(c)
        last_of_key[c.key] = text
    return firsts, sorted(again, key=lambda p: p[1].source_seqs[0])


def _candidate(c: prompts.CandidateFact, at: dict[int, datetime]) -> Candidate:
    """A candidate with its times: stated when first said (its earliest message: a
    restatement never moves it), valid from the event time when given, else then."""
    stated = min(at[s] for s in c.source_seqs)
    try:
        event = parse_event_time(c.valid_from, stated)
    except ValueError:  # "2026-02-30": repaired as no event time
        event = None
    return Candidate(
        c.text.strip(),
        c.key,
        c.importance,
        list(c.tags),
        sorted(set(c.source_seqs)),
        event or stated,
        stated,
        holds_one_value(c.key, c.one_value),
    )


def candidates_in_time_order(
    found: list[prompts.CandidateFact], rows: list[runs.BatchRow]
) -> tuple[list[Candidate], list[tuple[int, Candidate]]]:
    """The batch's first statements sorted by when they became true, and the restatements
    (index into that list, candidate): `split_restatements`."""
    at = {r.seq: r.created_at for r in rows}
    firsts, again = split_restatements(found)
    out = [_candidate(c, at) for c in firsts]
    order = time_order([(c.valid_from, c.stated_at, c.seqs[0]) for c in out])
    position = {old: new for new, old in enumerate(order)}
    restated = sorted(
        ((position[j], _candidate(c, at)) for j, c in again), key=lambda p: p[1].seqs[0]
    )
    return [out[i] for i in order], restated


def canonical(
    found: list[prompts.CandidateFact], attrs: Mapping[str, str]
) -> list[prompts.CandidateFact]:
    """Each candidate's key named by its attribute's canonical key."""
    return [c.model_copy(update={"key": attrs[c.key]}) if c.key in attrs else c for c in found]


async def propose(
    deps: Deps, outcome: Outcome, ids: tuple[uuid.UUID, uuid.UUID], batch: Batch
) -> Proposed:
    """Ask `record_facts` for the batch's candidates (one LLM call; no write)."""
    if not batch.messages:
        return Proposed([], [])
    batch_seqs = {r.seq for r in batch.rows}
    found: Salvaged = await ask(
        deps,
        outcome,
        ids,
        "extract",
        prompts.EXTRACT_SYSTEM,
        prompts.render_batch(batch.messages, batch.known, batch.vocabulary, batch.aliases),
        prompts.EXTRACT_TOOL,
        prompts.EXTRACT_TOOL_DESCRIPTION,
        prompts.CandidatesOut,
        parse=lambda data: salvage_candidates(data, batch_seqs),
    )
    check_candidates(found.facts, batch_seqs)
    cands, restated = candidates_in_time_order(canonical(found.facts, batch.attrs), batch.rows)
    return Proposed(cands, restated, found.dropped, found.repaired)

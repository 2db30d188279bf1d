"""Step 4 of a batch: the second call (`decide_facts`) decides each candidate against the
stored facts that could conflict with it (`app.facts.selection.stored_for_decision`), in a
prompt measured to stay within the cap. Skipped when nothing stored could be affected and
no two candidates share a key: everything is ADD."""

from __future__ import annotations

import uuid

from app.core.tokens import count_text
from app.facts import prompts
from app.facts.apply import Candidate, Proposal
from app.facts.batch import Batch
from app.facts.policy import Operation, plan_operations
from app.facts.propose import Proposed
from app.facts.run import Deps, Outcome, connected
from app.facts.selection import decision_prompt, fixed_tokens, stored_for_decision
from app.facts.usage import ask
from app.knowledge.scopes import Scope


def _new_facts(cands: list[Candidate], session_id: uuid.UUID) -> list[prompts.NewFact]:
    return [
        prompts.NewFact(c.text, c.key, c.valid_from, c.stated_at, str(session_id), c.seqs)
        for c in cands
    ]


def _proposal(
    first: int,
    last: int,
    cands: list[Candidate],
    ops: tuple[Operation, ...],
    unchanged: int,
    proposed: Proposed,
    batch: Batch,
) -> Proposal:
    return Proposal(
        first,
        last,
        cands,
        ops,
        unchanged,
        dropped=proposed.dropped,
        repaired=proposed.repaired,
        restated=proposed.restated,
        attrs=batch.attrs,
    )


async def decide(
    deps: Deps,
    outcome: Outcome,
    ids: tuple[uuid.UUID, uuid.UUID],
    scope: Scope,
    batch: Batch,
    proposed: Proposed,
) -> Proposal:
    """The batch's operations (at most one LLM call; no write)."""
    tenant_id, session_id = ids
    first, last = batch.rows[0].seq, batch.rows[-1].seq
    cands = proposed.candidates
    if not cands:
        return _proposal(first, last, [], (), 0, proposed, batch)
    cap = int(deps.settings.facts_input_tokens)
    news = _new_facts(cands, session_id)
    budget = (
        cap
        - fixed_tokens(prompts.DECIDE_SYSTEM, prompts.DecisionsOut)
        - count_text(prompts.render_decisions(news, []))
    )
    async with connected(deps.connect, commit=False) as conn:
        stored, affected = await stored_for_decision(
            conn, tenant_id, scope, cands, max(0, budget), batch.keys, batch.attrs
        )
    cand_keys = [c.key for c in cands if c.key]
    if not affected and len(set(cand_keys)) == len(cand_keys):  # nothing affected: all new
        ops = tuple(Operation("add", i) for i in range(len(cands)))
        return _proposal(first, last, cands, ops, 0, proposed, batch)
    prompt, stored = decision_prompt(news, stored, cap)
    decided = await ask(
        deps,
        outcome,
        ids,
        "decide",
        prompts.DECIDE_SYSTEM,
        prompt,
        prompts.DECIDE_TOOL,
        prompts.DECIDE_TOOL_DESCRIPTION,
        prompts.DecisionsOut,
    )
    shown = {f.id for f in stored}
    plan = plan_operations(decided.decisions, len(cands), [shown] * len(cands))
    return _proposal(first, last, cands, plan.operations, plan.unchanged, proposed, batch)

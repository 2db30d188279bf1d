"""Steps 1 and 2 of a batch: read the next messages after the watermark, and
select what the first call shows with them: the scope's attributes in use and the aliases
its decisions taught (`app.facts.policy.attributes`), the stored facts bearing on the
messages; the batch is as many messages as keep the rendered prompt within the cap."""

from __future__ import annotations

import dataclasses
import uuid

from app.facts import prompts
from app.facts import repository as repo
from app.facts import state as runs
from app.facts.policy import attributes
from app.facts.run import Deps, connected
from app.facts.selection import fit_batch, key_vocabulary, known_facts
from app.knowledge.scopes import Scope

READ_LIMIT = 500  # messages read per batch at most (the token cap usually ends it first)


@dataclasses.dataclass(frozen=True)
class Batch:
    """The messages of one batch, what the first call shows with them, and the scope's
    keys and attributes (key -> its attribute's canonical key) the later steps use."""

    rows: list[runs.BatchRow]
    messages: list[prompts.BatchMessage]
    known: list[prompts.ShownFact]
    vocabulary: list[tuple[str, int]]
    aliases: list[tuple[str, str]]
    keys: list[repo.KeyStat]
    attrs: dict[str, str]


async def read_batch(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    info: runs.SessionFacts,
    scope: Scope,
    after: int,
    upto: int,
) -> Batch:
    cap = int(deps.settings.facts_input_tokens)
    async with connected(deps.connect, commit=False) as conn:
        rows = await runs.messages_after(
            conn, tenant_id, session_id, after=after, upto=upto, limit=READ_LIMIT
        )
        if not rows:
            return Batch([], [], [], [], [], [], {})
        keys = await repo.scope_keys(conn, tenant_id, scope)
        attrs = attributes(
            [(k.key, k.first) for k in keys], await repo.joined_keys(conn, tenant_id, scope)
        )
        known = await known_facts(conn, tenant_id, scope, info.agent_id, rows, cap)
    vocabulary, aliases = key_vocabulary(keys, attrs, known, cap)
    taken, messages = fit_batch(rows, info.agent_id, known, cap, vocabulary, aliases)
    return Batch(taken, messages, known, vocabulary, aliases, keys, attrs)

"""Where the domains are joined: the hooks each request path runs, listed in one place.

Sessions, messages and contexts call other domains only through the hooks assembled
here, so nothing depends on which module was imported first:

- session created: memory freezes the ROM;
- before an append: shared memory offloads large tool results (may rewrite messages);
- after an append: shared memory records which messages hold data references, memory
  keeps the latest large result in the Kernel (these two, and the before hook, only for
  the batches they apply to); jobs schedule compression from the append's pressure row,
  and facts their extraction (both after commit);
- context blocks: the facts block (right after ROM and Kernel), the user's earlier
  conversations (`app.users.recall`), the knowledge block, then
  the learned block (the last is dropped first when the budget is short; all of them
  before L1 is cut).

The arq worker runs no request path (it neither creates sessions nor appends), so it
needs none of these hooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.context.blocks import BlockProvider
from app.facts import block as facts_block
from app.facts.trigger import extraction_trigger
from app.jobs import hooks as jobs_hooks
from app.knowledge import blocks as knowledge_blocks
from app.memory import hooks as memory_hooks
from app.messages.service import AfterAppend, AppendHooks, BeforeAppend, all_of
from app.sessions.service import CreateHook
from app.shared_memory import offload
from app.users import recall as user_recall

if TYPE_CHECKING:
    from app.state import AppState


@dataclass(frozen=True, slots=True)
class Hooks:
    session_created: tuple[CreateHook, ...]
    append: AppendHooks
    context_blocks: tuple[BlockProvider, ...]


def assemble(state: AppState) -> Hooks:
    before: tuple[BeforeAppend, ...] = (offload.offloader(state.shared_memory, state.settings),)
    after: tuple[AfterAppend, ...] = (offload.hold_references, memory_hooks.track_large_results)
    return Hooks(
        session_created=(memory_hooks.freeze_rom,),
        append=AppendHooks(before=before, after=after,
                           on_pressure=all_of(jobs_hooks.compression_trigger(state),
                                              extraction_trigger(state))),
        context_blocks=(facts_block.facts_provider, user_recall.provider(state),
                        knowledge_blocks.knowledge_provider, knowledge_blocks.learned_provider),
    )

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
  conversations (`app.users.earlier_conversations`), the knowledge block, then
  the learned block (the last is dropped first when the budget is short; all of them
  before L1 is cut).

The arq worker runs no request path (it neither creates sessions nor appends), so it
needs none of these hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import Settings
from app.core.queue import Queue
from app.facts import block as facts_block
from app.facts.trigger import extraction_trigger
from app.jobs import hooks as jobs_hooks
from app.jobs.service import pool_recorder
from app.knowledge import blocks as knowledge_blocks
from app.memory import hooks as memory_hooks
from app.messages.hooks import AfterAppend, AppendHooks, BeforeAppend, all_of
from app.shared_memory import offload
from app.shared_memory.runtime import SharedMemoryRuntime
from app.state import Hooks
from app.users import earlier_conversations as user_recall

# a connection of the hot paths' asyncpg pool (`app.core.pg.connection`)
Connect = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


def assemble(
    settings: Settings,
    shared_memory: SharedMemoryRuntime,
    queue: Queue,
    sessionmaker: async_sessionmaker[AsyncSession],
    connection: Connect,
) -> Hooks:
    """The hooks of the app whose stores these are (`app.main`'s lifespan)."""
    before: tuple[BeforeAppend, ...] = (offload.offloader(shared_memory, settings),)
    after: tuple[AfterAppend, ...] = (offload.hold_references, memory_hooks.track_large_results)
    return Hooks(
        session_created=(memory_hooks.freeze_rom,),
        append=AppendHooks(
            before=before,
            after=after,
            on_pressure=all_of(
                jobs_hooks.compression_trigger(
                    queue, settings.compress_busy_usage, pool_recorder(connection)
                ),
                extraction_trigger(queue, sessionmaker, settings),
            ),
        ),
        context_blocks=(
            facts_block.facts_provider,
            user_recall.provider(connection, settings),
            knowledge_blocks.knowledge_provider,
            knowledge_blocks.learned_provider,
        ),
    )

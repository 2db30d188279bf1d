"""Where the domains are joined: the hooks each request path runs, listed in one place.

Sessions, messages and contexts call other domains only through the hooks assembled
here, so nothing depends on which module was imported first:

- session created: memory freezes the ROM; session ended: facts extract at once;
- before an append: shared memory offloads large tool results (may rewrite messages);
- after an append: shared memory records which messages hold data references, memory
  keeps the latest large result in the Kernel (these two, and the before hook, only for
  the batches they apply to); memory schedules compression from the append's pressure row,
  and facts their extraction (both after commit);
- context blocks: the facts block (right after ROM and Kernel), the user's earlier
  conversations (`app.context.earlier_conversations`), the knowledge block, then
  the learned block (the last is dropped first when the budget is short; all of them
  before L1 is cut);
- a context built: manifests give it its `context_id` and record its manifest (their group
  writer, one per process);
- a recorded build replayed: each provider block rendered again from its sources (facts,
  knowledge, learned: `manifest_service.BlockReplays`, by block name).

The arq worker runs no request path (it neither creates sessions nor appends), so it
needs none of these hooks; it does build the same configuration (`configure`) and caches
(`caches`) as the API process.

The caches of a process, and the registry erasure forgets through (`caches`): the
heuristic stand-ins of L1 overflow, automatic recall's searches and the tool groups
around their hits, the rerank cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg
from redis.asyncio import Redis

from app.context import earlier_conversations as user_recall
from app.context.recent_reads import (
    SEARCH_CACHE_SECONDS,
    SEARCH_CACHE_SIZE,
    RecallGroups,
    RecallSearches,
)
from app.context.service import ContextHooks
from app.core import jsonlimits, pagination
from app.core.config import Settings
from app.core.queue import Queue
from app.core.tokens import count_text
from app.facts import block as facts_block
from app.facts.policy import fit_text
from app.facts.trigger import extraction_trigger, flush_on_end
from app.jobs.service import pool_recorder
from app.knowledge import blocks as knowledge_blocks
from app.knowledge import filters
from app.knowledge.packages import block_from_rows
from app.knowledge.render import learned_block
from app.llm.usage import meter_of
from app.manifests import service as manifest_service
from app.manifests.writer import GroupWriter
from app.memory import hooks as memory_hooks
from app.memory.aggregate import StandIns
from app.memory.compression_trigger import compression_trigger
from app.messages.hooks import AfterAppend, AppendHooks, BeforeAppend, all_of
from app.search.service import RerankCache
from app.session_resource.service import SessionHooks
from app.shared_memory import offload
from app.shared_memory.runtime import SharedMemoryRuntime
from app.state import Caches
from app.usage.repository import LedgerStore

# a connection of the hot paths' asyncpg pool (`app.core.pg.connection`)
Connect = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


def configure(settings: Settings) -> None:
    """The limits the request schemas read when they validate (JSON depth, page sizes,
    filter lists): set by `create_app` and by the worker's startup alike."""
    jsonlimits.configure(settings.max_json_depth)
    pagination.configure(settings)
    filters.configure(settings.filter_max_values)


def meter_llm(llm: Any, connect: Connect, settings: Settings) -> None:
    """The LLM client's calls go to the cost ledger on `connect`'s pool, within the
    tenants' daily token budgets (`app.llm.usage`); nothing without a client."""
    meter = meter_of(llm)
    if meter is not None:
        meter.attach(
            LedgerStore(connect),
            default_budget=settings.daily_token_budget,
            refresh=settings.usage_budget_refresh_seconds,
        )


def caches(redis: Redis | None) -> Caches:
    """The caches of one process (its lifespan state, or the worker's), each read by its
    class and forgotten through `Caches.forget`."""
    return Caches(
        StandIns(),
        RecallSearches(SEARCH_CACHE_SIZE, SEARCH_CACHE_SECONDS),
        RecallGroups(SEARCH_CACHE_SIZE, SEARCH_CACHE_SECONDS),
        RerankCache(redis),
    )


def assemble(
    settings: Settings,
    shared_memory: SharedMemoryRuntime,
    queue: Queue,
    connect: Connect,
    connection: Connect,
) -> tuple[object, ...]:
    """The hooks of the app whose stores these are (`app.main`'s lifespan puts them in its
    state's parts): each declared by the domain that runs it."""
    before: tuple[BeforeAppend, ...] = (offload.offloader(shared_memory, settings),)
    after: tuple[AfterAppend, ...] = (offload.hold_references, memory_hooks.track_large_results)
    return (
        SessionHooks(
            created=(memory_hooks.freeze_rom,),
            ended=(flush_on_end(queue, connect),),
        ),
        AppendHooks(
            before=before,
            after=after,
            on_pressure=all_of(
                compression_trigger(queue, settings.compress_busy_usage, pool_recorder(connection)),
                extraction_trigger(queue, connect, settings),
            ),
        ),
        ContextHooks(
            blocks=(
                facts_block.facts_provider,
                user_recall.provider(connection, settings),
                knowledge_blocks.knowledge_provider,
                knowledge_blocks.learned_provider,
            ),
            built=manifest_service.Finisher(GroupWriter(connection)),
        ),
        manifest_service.BlockReplays(
            {
                "facts": _replay_facts,
                "knowledge": _replay_knowledge,
                "learned": _replay_learned,
            }
        ),
    )


# A recorded block rendered again from its sources as they are now (`BlockReplay`), for
# the manifests' replay: each as its provider renders it. (They belong beside their
# providers, in app.facts.block and app.knowledge.blocks; joined here meanwhile.)
def _replay_facts(
    replay: Mapping[str, Any], sources: Sequence[Mapping[str, Any]], rows: Sequence[Any]
) -> str | None:
    fitted = fit_text(
        replay["header"],
        [facts_block.replay_line(r, s) for r, s in zip(rows, sources, strict=True)],
        int(replay["limit"]),
        count_text,
    )
    return fitted[0] if fitted else None


def _replay_knowledge(
    replay: Mapping[str, Any], sources: Sequence[Mapping[str, Any]], rows: Sequence[Any]
) -> str | None:
    return block_from_rows(replay["header"], rows, int(replay["limit"]))


def _replay_learned(
    replay: Mapping[str, Any], sources: Sequence[Mapping[str, Any]], rows: Sequence[Any]
) -> str | None:
    return learned_block(rows[0].version, rows[0].content, int(replay["limit"]), count_text)

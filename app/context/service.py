"""Building a session's context: the one code path of `POST /sessions/{id}/context` and of
the MCP `get_context` tool."""

import uuid
from dataclasses import dataclass
from typing import Any

from app.auth.caller import Caller
from app.context import builder
from app.context.blocks import BlockProvider, OneConnection
from app.context.schemas import ContextRequest
from app.context.swap_recall import SwapRecall, recall_config
from app.memory.aggregate import StandIns, load
from app.memory.repository import CONTEXT
from app.state import AppState


@dataclass(frozen=True, slots=True)
class ContextHooks:
    """What a build calls in other domains (a part of the app's state, joined in
    `app.wiring`): the block providers, in order, and what ends a build (manifests)."""

    blocks: tuple[BlockProvider, ...]
    built: builder.FinishBuild


async def build_and_record(
    state: AppState, caller: Caller, session_id: uuid.UUID, body: ContextRequest | None, fmt: str
) -> tuple[builder.Built, dict[str, Any], dict[str, Any] | None]:
    """The built context of a session the caller may see (404 `session_not_found` else),
    then its `context_id` and manifest (the `context_built` hook): (built, the
    response's extra fields, the format's payload when rendered already). With recall on
    (the session's `config.recall`, or `body.recall`) the build also searches the swap for
    the newest user message."""
    # one round trip reads the session and its memory
    async with state.connection() as conn:
        loaded = await load(
            conn,
            caller.tenant_id,
            session_id,
            window=CONTEXT,
            caller=caller,
            stand_ins=state.caches[StandIns],
        )
    session = loaded.session
    hooks = state.parts[ContextHooks]
    recall = recall_config(session.config, body.recall if body is not None else None)
    blocks = OneConnection(state.db_connection)  # the providers' one connection
    try:
        built = await builder.build(
            blocks,
            session,
            loaded,
            providers=hooks.blocks,
            recall=SwapRecall(state, caller.tenant_id, session_id, recall)
            if recall.enabled
            else None,
            as_of=body.facts_as_of if body is not None else None,
            query=recall.query.strip() or None if recall.query else None,
        )
    finally:
        await blocks.close()
    extra, payload = await hooks.built(built, body, fmt)
    return built, extra, payload

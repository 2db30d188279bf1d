"""Memory and Kernel endpoints of a session."""

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query, Request, Response

from app.auth.deps import DbDep
from app.core.errors import ERROR_RESPONSES
from app.core.pagination import (
    CursorQuery,
    decode_cursor,
    fetch_limit,
    page,
)
from app.jobs.service import compression_status, enqueue_compression
from app.memory import examples, kernel_service, read_models, repository, service, tasks
from app.memory.schemas import (
    ClearedPublic,
    CompressPublic,
    KernelPublic,
    KernelSchemaPublic,
    KernelSchemaUpdate,
    KernelToolsUpdate,
    MemoryPublic,
    PromotePublic,
    PromoteRequest,
    SnapshotList,
    SnapshotPublic,
)
from app.models.session import SessionRow
from app.sessions.deps import SessionDep
from app.state import app_state

router = APIRouter(tags=["memory"], responses=ERROR_RESPONSES)
SchemaName = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,200}$")]


@router.get(
    "/sessions/{session_id}/memory",
    response_model=MemoryPublic,
    summary="Get a session's memory layers",
)
async def get_memory(session: SessionDep, db: DbDep) -> MemoryPublic:
    """The layers: L1 seqs, L2 summaries, promoted seqs, tokens and usage."""
    return await _memory(db, session)


async def _memory(db: DbDep, session: SessionRow) -> MemoryPublic:
    """The session's memory read model, with its compression job's status."""
    compression = await compression_status(db, session.tenant_id, session.id)
    return await read_models.memory_public(db, session, compression)


@router.get(
    "/sessions/{session_id}/memory/snapshots",
    response_model=SnapshotList,
    summary="List archived L2 snapshots",
)
async def list_memory_snapshots(
    session: SessionDep,
    db: DbDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: CursorQuery = None,
) -> SnapshotList:
    """L2 snapshots archived in swap, newest first."""
    data = decode_cursor(cursor, {"s": int})
    before = data["s"] if data is not None else None
    rows = await repository.snapshots_page(
        db,
        session.tenant_id,
        session.id,
        before_start=before,
        limit=fetch_limit(limit),
    )
    shown, nxt = page(rows, limit, lambda r: {"s": r.start_seq})
    items = [
        SnapshotPublic(
            id=str(r.id),
            start_seq=r.start_seq,
            end_seq=r.end_seq,
            content=r.content,
            token_count=r.token_count,
            summary_count=r.summary_count,
            created_at=r.created_at,
        )
        for r in shown
    ]
    return SnapshotList(items=items, next_cursor=nxt)


@router.post(
    "/sessions/{session_id}/memory/compress",
    response_model=CompressPublic,
    status_code=202,
    responses={200: {"model": CompressPublic}},
    summary="Compress a session's memory",
)
async def compress_memory(
    session: SessionDep, db: DbDep, request: Request, response: Response, wait: bool = False
) -> CompressPublic:
    """Enqueue compression (202), or with ``wait=true`` compress now and answer when done
    (200): the job's own work, with the LLM when configured (the heuristic at once if it
    fails). Past `LOOM_COMPRESS_WAIT_SECONDS` the answer is 202 with the job's status
    (what was applied stays; the queued job finishes the rest)."""
    state = app_state(request.app)
    if wait:
        outcome = await tasks.compress_and_wait(
            state, session.tenant_id, session.id, within=state.settings.compress_wait_seconds
        )
        if outcome is None:
            await enqueue_compression(
                state.queue,
                state.db_connection,
                session.tenant_id,
                session.id,
                trigger="api",
                force=True,
            )
            return CompressPublic(enqueued=True, memory=await _memory(db, session))
        response.status_code = 200
        return CompressPublic(
            summaries_written=outcome.summaries, memory=await _memory(db, session)
        )
    # this request writes nothing the job needs, so it may enqueue now; the pending row is
    # written in its own transaction so GET /memory shows it at once
    ok = await enqueue_compression(
        state.queue, state.db_connection, session.tenant_id, session.id, trigger="api", force=True
    )
    return CompressPublic(enqueued=ok)


@router.post(
    "/sessions/{session_id}/memory/promote",
    response_model=PromotePublic,
    summary="Promote old messages into the context",
)
async def promote_memory(
    body: Annotated[PromoteRequest, Body(openapi_examples=examples.PROMOTE)],
    session: SessionDep,
    db: DbDep,
) -> PromotePublic:
    """Copy older messages into the context (after L2, before L1); 409 over budget."""
    result = await service.promote_messages(db, session, body.all_seqs())
    return PromotePublic(
        added=result.added,
        promoted_seqs=result.promoted,
        promoted_tokens=result.promoted_tokens,
        usage=result.usage,
        skipped=result.skipped,  # type: ignore[arg-type]
    )


@router.delete(
    "/sessions/{session_id}/memory/promoted",
    response_model=ClearedPublic,
    summary="Remove the promoted messages from the context",
)
async def clear_promoted_memory(session: SessionDep, db: DbDep) -> ClearedPublic:
    """Remove every promoted message from the context; returns the count."""
    return ClearedPublic(cleared=await service.clear_promoted(db, session))


@router.get(
    "/sessions/{session_id}/kernel",
    response_model=KernelPublic,
    summary="Get the Kernel: tools and cached schemas",
)
async def get_kernel(session: SessionDep, db: DbDep) -> KernelPublic:
    """Tools, cached schemas (most recent first) and the latest large result reference."""
    return kernel_service.to_public(await kernel_service.get(db, session))


@router.put(
    "/sessions/{session_id}/kernel/tools",
    response_model=KernelPublic,
    summary="Replace the Kernel's tools",
)
async def put_kernel_tools(
    body: Annotated[KernelToolsUpdate, Body(openapi_examples=examples.KERNEL_TOOLS)],
    session: SessionDep,
    db: DbDep,
) -> KernelPublic:
    """Replace the session's tool definitions (409 if ROM + Kernel > half the budget)."""
    tools = [t.model_dump() for t in body.tools]
    return kernel_service.to_public(await kernel_service.put_tools(db, session, tools))


@router.put(
    "/sessions/{session_id}/kernel/schemas/{name}",
    response_model=KernelSchemaPublic,
    summary="Cache a schema in the Kernel",
)
async def put_kernel_schema(
    name: SchemaName,
    body: Annotated[KernelSchemaUpdate, Body(openapi_examples=examples.KERNEL_SCHEMA)],
    session: SessionDep,
    db: DbDep,
) -> KernelSchemaPublic:
    """Cache a schema (LRU of 10: the least recently used one is evicted)."""
    evicted = await kernel_service.put_schema(db, session, name, body.schema_)
    return KernelSchemaPublic(name=name, schema=body.schema_, evicted=evicted)


@router.get(
    "/sessions/{session_id}/kernel/schemas/{name}",
    response_model=KernelSchemaPublic,
    summary="Read a cached schema",
)
async def get_kernel_schema(name: SchemaName, session: SessionDep, db: DbDep) -> KernelSchemaPublic:
    """Read a cached schema; the read makes it the most recently used."""
    schema = await kernel_service.read_schema(db, session, name)
    return KernelSchemaPublic(name=name, schema=schema)

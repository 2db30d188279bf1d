"""What the model saw: a session's recorded context builds, each one's manifest, a replay
to the same bytes, and the diff of two builds. Visible exactly to those who may see the
session (`SessionDep`: anyone else gets 404, as for the session)."""

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import asyncpg
from fastapi import APIRouter, Query, Request

from app.auth.deps import DbDep
from app.context.schemas import ManifestPublic
from app.core.errors import ERROR_RESPONSES, NotFound
from app.core.pagination import CursorQuery, decode_cursor, fetch_limit, invalid_cursor, page
from app.manifests import diff as manifest_diff
from app.manifests import replay
from app.manifests import repository as repo
from app.manifests.hashes import FORMATS
from app.manifests.schemas import ContextDiffPublic, ContextList, ContextSummaryPublic, ReplayPublic
from app.manifests.service import BlockReplays
from app.models.session import SessionRow
from app.sessions.deps import SessionDep
from app.state import app_state

router = APIRouter(tags=["context"], responses=ERROR_RESPONSES)


class ContextNotFound(NotFound):
    code = "context_not_found"

    def __init__(self) -> None:
        super().__init__(
            "No such recorded context build in this session (builds are "
            "recorded with the session's config.audit or record: true)."
        )


async def _load(
    conn: asyncpg.Connection, session: SessionRow, context_id: uuid.UUID
) -> repo.ManifestRow:
    row = await repo.get(conn, session.tenant_id, session.id, context_id)
    if row is None:
        raise ContextNotFound()
    return row


def _summary(r: repo.ManifestRow) -> ContextSummaryPublic:
    m = r.manifest
    return ContextSummaryPublic(
        context_id=r.id,
        created_at=r.created_at,
        format=r.format,
        budget=r.budget,
        total_tokens=r.total_tokens,
        usage=float(m["usage"]),
        tokens=m["tokens"],
        blocks=len(m["blocks"]),
        sha256=m["sha256"],
    )


@router.get(
    "/sessions/{session_id}/contexts",
    response_model=ContextList,
    summary="List a session's recorded context builds",
)
async def list_contexts(
    session: SessionDep,
    db: DbDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: CursorQuery = None,
) -> ContextList:
    """Recorded builds, newest first: tokens per layer, usage, hashes."""
    data = decode_cursor(cursor, {"t": str, "i": str})
    before = None
    if data is not None:
        try:
            before = (datetime.fromisoformat(data["t"]), uuid.UUID(data["i"]))
        except ValueError as exc:
            raise invalid_cursor() from exc
    rows = await repo.page(
        db,
        session.tenant_id,
        session.id,
        before=before,
        limit=fetch_limit(limit),
    )
    shown, nxt = page(rows, limit, lambda r: {"t": r.created_at.isoformat(), "i": str(r.id)})
    return ContextList(items=[_summary(r) for r in shown], next_cursor=nxt)


@router.get(
    "/sessions/{session_id}/contexts/{context_id}",
    response_model=ManifestPublic,
    summary="Get a recorded build's manifest",
)
async def get_context_manifest(
    request: Request, session: SessionDep, db: DbDep, context_id: uuid.UUID
) -> dict[str, Any]:
    """Every block the model read, in order, with its layer, sources, tokens,
    cache_control and why it is there; what was dropped or shrunk; budget, usage,
    tokenizer, versions, config hash and the SHA-256 of the rendered bytes per format."""
    conn = db
    manifest = (await _load(conn, session, context_id)).manifest
    if all(f in manifest["sha256"] for f in FORMATS):
        return replay.fill_hashes(manifest, None)
    # (the session: the knowledge rows' reads take it until they take a connection)
    sources = await replay.load_sources(db, session.tenant_id, session.id, manifest)
    built, _ = replay.rebuild(manifest, sources, app_state(request.app).parts[BlockReplays].by_name)
    return replay.fill_hashes(manifest, built)


@router.post(
    "/sessions/{session_id}/contexts/{context_id}/replay",
    response_model=ReplayPublic,
    summary="Replay a recorded build",
)
async def replay_context(
    request: Request,
    session: SessionDep,
    db: DbDep,
    context_id: uuid.UUID,
    format: Literal["anthropic", "openai", "raw"] | None = None,
) -> ReplayPublic:
    """Re-render the build from the sources its manifest names: the same bytes (the
    recorded SHA-256), or 409 `context_changed` naming every source that changed or was
    erased since (`details.changed`). `format`: the build's own by default."""
    row = await _load(db, session, context_id)
    fmt = format or row.format
    # (the session: the knowledge rows' reads take it until they take a connection)
    sources = await replay.load_sources(db, session.tenant_id, session.id, row.manifest)
    built, changes = replay.rebuild(
        row.manifest, sources, app_state(request.app).parts[BlockReplays].by_name
    )
    if built is None:
        raise replay.ContextChanged(
            "This build cannot be replayed: " + "; ".join(changes) + ".",
            details={"changed": changes},
        )
    payload, digest = replay.render(row.manifest, built, fmt)
    return ReplayPublic(
        context_id=row.id,
        format=fmt,
        sha256=digest,
        system=payload.get("system"),
        messages=payload["messages"],
        tools=payload["tools"],
        layers=payload.get("layers"),
    )


@router.get(
    "/sessions/{session_id}/contexts/{context_id}/diff/{other_id}",
    response_model=ContextDiffPublic,
    summary="Diff two recorded builds",
)
async def diff_contexts(
    session: SessionDep, db: DbDep, context_id: uuid.UUID, other_id: uuid.UUID
) -> ContextDiffPublic:
    """Blocks added, removed and changed from build `context_id` (a) to `other_id` (b),
    with token deltas (b - a)."""
    conn = db
    a = await _load(conn, session, context_id)
    b = await _load(conn, session, other_id)
    return ContextDiffPublic(a=a.id, b=b.id, **manifest_diff.diff(a.manifest, b.manifest))

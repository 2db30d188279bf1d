"""Every context build gets a `context_id`; its manifest is made when asked for (`raw`,
`manifest: true`) or recorded (`config.audit` of the session, or `record: true`).

Storage (decision, issue 30): one compact row (`context_manifests`: ids, versions, hashes,
no content) inserted on the hot paths' pool by the build's own request before the response
is sent. Nothing to flush, nothing lost on a kill -9 of the API once a client has its
answer, and no second copy of the data in Redis; the price is one INSERT per recorded build
(measured in bench/manifests.py). A build that is not recorded writes nothing.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson

from app.context import manifest as manifests
from app.context import manifest_repository as repo
from app.context.builder import Built
from app.context.render import RENDERERS
from app.context.schemas import ContextRequest
from app.core.pg import dumps
from app.sessions.access import SessionNotFound
from app.state import AppState


def should_record(session_config: dict[str, Any] | None, body: ContextRequest | None) -> bool:
    """`record` of the request when given, else the session's `config.audit`."""
    if body is not None and body.record is not None:
        return body.record
    return bool((session_config or {}).get("audit"))


def request_options(body: ContextRequest | None) -> dict[str, Any]:
    """What of the request shapes the build (the config hash covers it)."""
    recall = body.recall.model_dump() if body is not None and body.recall is not None else None
    return {"recall": recall}


def make(built: Built, body: ContextRequest | None, fmt: str, context_id: uuid.UUID,
         rendered: dict[str, Any] | None = None, created_at: datetime | None = None,
         formats: tuple[str, ...] = manifests.FORMATS) -> dict[str, Any]:
    """The manifest of `built` with the SHA-256 of `formats` (the payload of `fmt`, when
    already rendered, is reused)."""
    sha = manifests.rendered_sha256(built, formats,
                                    rendered={fmt: rendered} if rendered else None)
    config = manifests.config_hash(built.loaded.session.config, request_options(body))
    return manifests.manifest(built, context_id=str(context_id),
                              created_at=created_at or datetime.now(UTC), fmt=fmt,
                              sha256=sha, config_sha256=config)


def _json(value: dict[str, Any]) -> str:
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        return dumps(value)


async def finish(state: AppState, built: Built, body: ContextRequest | None, fmt: str,
                 conn: asyncpg.Connection | None = None
                 ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The response's `context_id`, `recorded` and `manifest` (null unless asked for), and
    the format's payload when it was rendered here: the manifest is made only when asked
    for or recorded, and a recorded one is committed (on `conn` when given, else on a
    connection of the pool) before this returns."""
    context_id = uuid.uuid4()
    session = built.loaded.session
    record = should_record(session.config, body)
    wanted = fmt == "raw" or (body is not None and body.manifest)
    if not (record or wanted):
        return {"context_id": str(context_id), "recorded": False, "manifest": None}, None
    payload = RENDERERS[fmt](built)
    created_at = datetime.now(UTC)
    # A recorded build hashes the bytes it answered with; the other formats are the same
    # build rendered otherwise, hashed when the manifest is read (`app.context.replay`
    # checks the recorded bytes first). Rendering and hashing all three here cost as much
    # as the rest of the manifest. A manifest returned in the response has all three.
    made = make(built, body, fmt, context_id, payload, created_at,
                manifests.FORMATS if wanted else (fmt,))
    if record:
        row = (session.tenant_id, session.id, context_id, fmt, built.total_tokens,
               built.view.budget, _json(made), created_at)
        try:
            if conn is not None:
                await repo.insert(conn, *row)
            else:
                async with state.connection() as own:
                    await repo.insert(own, *row)
        except asyncpg.ForeignKeyViolationError as exc:  # deleted while building
            raise SessionNotFound() from exc
    extra = {"context_id": str(context_id), "recorded": record,
             "manifest": made if wanted else None}
    return extra, payload

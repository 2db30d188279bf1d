"""Every context build gets a `context_id`; its manifest is made when asked for (`raw`,
`manifest: true`) or recorded (`config.audit` of the session, or `record: true`).

Storage (decision): one compact row (`context_manifests`: ids, versions, hashes,
no content; the manifest in its stored form, `app.manifests.record.record`, as `json`)
inserted on the hot paths' pool before the build's response is sent, the rows of
concurrent builds in one statement (`app.manifests.writer.GroupWriter`, one per process in
its state). Nothing to flush later, nothing lost on a kill -9 of the API once a client has
its answer, and no second copy of the data in Redis (which keeps nothing on disk here);
measured in bench/manifests.py. A build that is not recorded writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from app.context.builder import Built
from app.context.render import RENDERERS
from app.context.schemas import ContextRequest
from app.core.pg import dumps
from app.manifests import hashes
from app.manifests import record as manifests
from app.manifests import repository as repo
from app.manifests.replay import BlockReplay
from app.manifests.writer import GroupWriter
from app.models.base import time_ordered_id


def should_record(session_config: dict[str, Any] | None, body: ContextRequest | None) -> bool:
    """`record` of the request when given, else the session's `config.audit`."""
    if body is not None and body.record is not None:
        return body.record
    return bool((session_config or {}).get("audit"))


def request_options(body: ContextRequest | None) -> dict[str, Any]:
    """What of the request shapes the build (the config hash covers it)."""
    recall = body.recall.model_dump() if body is not None and body.recall is not None else None
    return {"recall": recall}


def _record(
    built: Built,
    body: ContextRequest | None,
    fmt: str,
    rendered: dict[str, Any] | None,
    formats: tuple[str, ...],
) -> dict[str, Any]:
    """The stored form of `built`'s manifest with the SHA-256 of `formats` (the payload of
    `fmt`, when already rendered, is reused)."""
    sha = hashes.rendered_sha256(built, formats, rendered={fmt: rendered} if rendered else None)
    config = hashes.config_hash(built.loaded.session.config, request_options(body))
    return manifests.record(built, sha256=sha, config_sha256=config)


def _expand(
    built: Built, stored: dict[str, Any], fmt: str, context_id: uuid.UUID, created_at: datetime
) -> dict[str, Any]:
    return manifests.expand(
        stored,
        context_id=str(context_id),
        session_id=str(built.loaded.session.id),
        created_at=created_at,
        fmt=fmt,
        budget=built.view.budget,
        total_tokens=built.total_tokens,
    )


def make(
    built: Built,
    body: ContextRequest | None,
    fmt: str,
    context_id: uuid.UUID,
    rendered: dict[str, Any] | None = None,
    created_at: datetime | None = None,
    formats: tuple[str, ...] = hashes.FORMATS,
) -> dict[str, Any]:
    """The manifest of `built` with the SHA-256 of `formats`."""
    stored = _record(built, body, fmt, rendered, formats)
    return _expand(built, stored, fmt, context_id, created_at or datetime.now(UTC))


def _json(value: dict[str, Any]) -> str:
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        return dumps(value)


async def finish(
    writer: GroupWriter, built: Built, body: ContextRequest | None, fmt: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The response's `context_id`, `recorded` and `manifest` (null unless asked for), and
    the format's payload when it was rendered here: the manifest is made only when asked
    for or recorded, and a recorded one is committed before this returns."""
    created_at = datetime.now(UTC)
    context_id = time_ordered_id(created_at)
    session = built.loaded.session
    record = should_record(session.config, body)
    wanted = fmt == "raw" or (body is not None and body.manifest)
    if not (record or wanted):
        return {"context_id": str(context_id), "recorded": False, "manifest": None}, None
    payload = RENDERERS[fmt](built)
    # A recorded build hashes the bytes it answered with; the other formats are the same
    # build rendered otherwise, hashed when the manifest is read (`app.manifests.replay`
    # checks the recorded bytes first). Rendering and hashing all three here cost as much
    # as the rest of the manifest. A manifest returned in the response has all three.
    stored = _record(built, body, fmt, payload, hashes.FORMATS if wanted else (fmt,))
    if record:
        await writer.write(
            repo.NewRow(
                context_id,
                session.tenant_id,
                session.id,
                fmt,
                built.total_tokens,
                built.view.budget,
                _json(stored),
                created_at,
            ),
        )
    extra = {
        "context_id": str(context_id),
        "recorded": record,
        "manifest": _expand(built, stored, fmt, context_id, created_at) if wanted else None,
    }
    return extra, payload


@dataclass(frozen=True, slots=True)
class BlockReplays:
    """The providers' blocks rendered again, by block name, for a replay (a part of the
    app's state, joined in `app.wiring`)."""

    by_name: Mapping[str, BlockReplay]


@dataclass(frozen=True, slots=True)
class Finisher:
    """The context's `context_built` hook (`app.context.builder.FinishBuild`), joined in
    `app.wiring`: `finish` with this process's group writer."""

    writer: GroupWriter

    async def __call__(
        self, built: Built, body: ContextRequest | None, fmt: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        return await finish(self.writer, built, body, fmt)

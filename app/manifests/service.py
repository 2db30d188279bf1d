"""Every context build gets a `context_id`; its manifest is made when asked for (`raw`,
`manifest: true`) or recorded (`config.audit` of the session, or `record: true`).

Storage (decision, issue 30): one compact row (`context_manifests`: ids, versions, hashes,
no content; the manifest in its stored form, `app.manifests.record.record`, as `json`)
inserted on the hot paths' pool before the build's response is sent, the rows of
concurrent builds in one statement (`GroupWriter`). Nothing to flush later, nothing lost
on a kill -9 of the API once a client has its answer, and no second copy of the data in
Redis (which keeps nothing on disk here); measured in bench/manifests.py. A build that is
not recorded writes nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson

from app.context.builder import Built
from app.context.render import RENDERERS
from app.context.schemas import ContextRequest
from app.core.pg import dumps
from app.manifests import record as manifests
from app.manifests import repository as repo
from app.models.base import time_ordered_id
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


def _record(
    built: Built,
    body: ContextRequest | None,
    fmt: str,
    rendered: dict[str, Any] | None,
    formats: tuple[str, ...],
) -> dict[str, Any]:
    """The stored form of `built`'s manifest with the SHA-256 of `formats` (the payload of
    `fmt`, when already rendered, is reused)."""
    sha = manifests.rendered_sha256(built, formats, rendered={fmt: rendered} if rendered else None)
    config = manifests.config_hash(built.loaded.session.config, request_options(body))
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
    formats: tuple[str, ...] = manifests.FORMATS,
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
    state: AppState, built: Built, body: ContextRequest | None, fmt: str
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
    # build rendered otherwise, hashed when the manifest is read (`app.context.replay`
    # checks the recorded bytes first). Rendering and hashing all three here cost as much
    # as the rest of the manifest. A manifest returned in the response has all three.
    stored = _record(built, body, fmt, payload, manifests.FORMATS if wanted else (fmt,))
    if record:
        await state.manifest_writer.write(
            state,
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


class GroupWriter:
    """Writes the manifests of concurrent builds together: a build's row joins the next
    statement, and the build answers once that statement has committed. One process's
    builds that finish while a write is in flight share the next one (at most `batch`
    rows), so a busy API pays one round trip for many builds; with none in flight a build
    writes its own row at once."""

    def __init__(self, batch: int = 64) -> None:
        self.batch = batch
        self.pending: list[tuple[repo.NewRow, asyncio.Future[None]]] = []
        self.running = False

    async def write(self, state: AppState, row: repo.NewRow) -> None:
        if self.running:  # a write is in flight: join the next statement
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.pending.append((row, done))
            await done
            return
        # none in flight: this build writes its own row (no hop through another task);
        # rows that come meanwhile are written by a drain once it is done
        self.running = True
        try:
            async with state.connection() as conn:
                [error] = await self._insert(conn, [row])
        finally:
            if self.pending:
                asyncio.get_running_loop().create_task(self._drain(state))
            else:
                self.running = False
        if error is not None:
            raise error

    async def _drain(self, state: AppState) -> None:
        try:
            while self.pending:
                await self._write_pending(state)
        finally:
            self.running = False

    async def _write_pending(self, state: AppState) -> None:
        """Write batches on one connection while rows keep coming (a busy API keeps it
        between its statements instead of waiting for the pool each time). A batch that
        could not be written fails its builds; the rows behind it get a fresh try."""
        batch = self._take()
        try:
            async with state.connection() as conn:
                while batch:
                    self._settle(batch, await self._insert(conn, [r for r, _ in batch]))
                    batch = self._take()
        except asyncio.CancelledError as exc:  # shutting down: the waiting builds fail
            self._settle(batch, None, exc)
            raise
        except Exception as exc:  # every waiting build gets the error (e.g. 503)
            self._settle(batch, None, exc)

    def _take(self) -> list[tuple[repo.NewRow, asyncio.Future[None]]]:
        batch, self.pending = self.pending[: self.batch], self.pending[self.batch :]
        return batch

    @staticmethod
    async def _insert(
        conn: asyncpg.Connection, rows: list[repo.NewRow]
    ) -> list[BaseException | None]:
        try:
            await repo.insert_many(conn, rows)
            return [None] * len(rows)
        except asyncpg.ForeignKeyViolationError:
            # a session deleted while building: the others still go in, one by one
            results: list[BaseException | None] = []
            for row in rows:
                try:
                    await repo.insert(conn, row)
                    results.append(None)
                except asyncpg.ForeignKeyViolationError:
                    results.append(SessionNotFound())
            return results

    @staticmethod
    def _settle(
        batch: list[tuple[repo.NewRow, asyncio.Future[None]]],
        results: list[BaseException | None] | None,
        error: BaseException | None = None,
    ) -> None:
        """Answer the waiting builds: each its own result, or all the same `error`."""
        for i, (_, done) in enumerate(batch):
            if done.done():
                continue
            failed = error if results is None else results[i]
            if failed is None:
                done.set_result(None)
            else:
                done.set_exception(failed)



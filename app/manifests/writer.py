"""The context manifests' group writer (`app.manifests.service`): one per process, in its
lifespan state (the `context_built` hook, `app.manifests.service.Finisher`), over the hot
paths' pool."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import asyncpg

from app.manifests import repository as repo
from app.sessions.access import SessionNotFound

# a connection of the hot paths' asyncpg pool (`app.core.pg.connection`)
Connect = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


class GroupWriter:
    """Writes the manifests of concurrent builds together: a build's row joins the next
    statement, and the build answers once that statement has committed. One process's
    builds that finish while a write is in flight share the next one (at most `batch`
    rows), so a busy API pays one round trip for many builds; with none in flight a build
    writes its own row at once."""

    def __init__(self, connect: Connect, batch: int = 64) -> None:
        self.connect = connect
        self.batch = batch
        self.pending: list[tuple[repo.NewRow, asyncio.Future[None]]] = []
        self.running = False

    async def write(self, row: repo.NewRow) -> None:
        if self.running:  # a write is in flight: join the next statement
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.pending.append((row, done))
            await done
            return
        # none in flight: this build writes its own row (no hop through another task);
        # rows that come meanwhile are written by a drain once it is done
        self.running = True
        try:
            async with self.connect() as conn:
                [error] = await self._insert(conn, [row])
        finally:
            if self.pending:
                asyncio.get_running_loop().create_task(self._drain())
            else:
                self.running = False
        if error is not None:
            raise error

    async def _drain(self) -> None:
        try:
            while self.pending:
                await self._write_pending()
        finally:
            self.running = False

    async def _write_pending(self) -> None:
        """Write batches on one connection while rows keep coming (a busy API keeps it
        between its statements instead of waiting for the pool each time). A batch that
        could not be written fails its builds; the rows behind it get a fresh try."""
        batch = self._take()
        try:
            async with self.connect() as conn:
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

# Generated from loom_client/_async/users.py by scripts/generate_sync.py: do not edit.
"""Users, erasure, export and import (issue 28)."""

from __future__ import annotations

from collections.abc import Iterator

from loom_client._sync.base import BaseClient
from loom_client._wire import RequestOptions, query, segment
from loom_client.models.users import Erasure, ErasureList, ImportResult, User, UserList
from loom_client.operations import operation

NDJSON = "application/x-ndjson"


class UsersMixin(BaseClient):
    @operation("GET", "/v1/users")
    def list_users(self, *, limit: int | None = None, cursor: str | None = None,
                   options: RequestOptions | None = None) -> UserList:
        """One page of users (agent keys: the users their agent has sessions with)."""
        return self._request(UserList, "GET", "/v1/users", options=options,
                             params=query(limit=limit, cursor=cursor))

    @operation("GET", "/v1/users")
    def iter_users(self, *, page_size: int | None = None,
                   options: RequestOptions | None = None) -> Iterator[User]:
        """Every user, following the cursors page by page."""
        cursor: str | None = None
        while True:
            page = self.list_users(limit=page_size, cursor=cursor, options=options)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("GET", "/v1/users/{user_id}")
    def get_user(self, user_id: str, *, options: RequestOptions | None = None) -> User:
        """One user, with the size of their facts tier."""
        return self._request(User, "GET", f"/v1/users/{segment(user_id)}",
                             options=options)

    @operation("DELETE", "/v1/users/{user_id}")
    def erase_user(self, user_id: str, *,
                   options: RequestOptions | None = None) -> Erasure:
        """Erase everything about a user; the receipt (`status` "running" while a worker
        finishes a big one: `get_erasure`)."""
        return self._request(Erasure, "DELETE", f"/v1/users/{segment(user_id)}",
                             options=options)

    @operation("DELETE", "/v1/agents/{agent_id}/memory")
    def erase_agent_memory(self, agent_id: str, *,
                           options: RequestOptions | None = None) -> Erasure:
        """Erase an agent's private knowledge tier and shared-memory namespace."""
        return self._request(Erasure, "DELETE",
                             f"/v1/agents/{segment(agent_id)}/memory", options=options)

    @operation("GET", "/v1/erasures/{erasure_id}")
    def get_erasure(self, erasure_id: str, *,
                    options: RequestOptions | None = None) -> Erasure:
        """An erasure's receipt."""
        return self._request(Erasure, "GET", f"/v1/erasures/{segment(erasure_id)}",
                             options=options)

    @operation("GET", "/v1/erasures")
    def find_erasures(self, *, user_id: str | None = None, session_id: str | None = None,
                      agent_id: str | None = None, limit: int | None = None,
                      options: RequestOptions | None = None) -> ErasureList:
        """The tenant's erasure receipts, newest first; with one of the ids, that subject's
        ("was this user erased?")."""
        return self._request(ErasureList, "GET", "/v1/erasures", options=options,
                             params=query(user_id=user_id, session_id=session_id,
                                          agent_id=agent_id, limit=limit))

    @operation("GET", "/v1/users/{user_id}/export")
    def export_user(self, user_id: str, *, options: RequestOptions | None = None) -> bytes:
        """Everything about a user as NDJSON (see `import_export`)."""
        r = self._send("GET", f"/v1/users/{segment(user_id)}/export", options=options)
        return r.content

    @operation("GET", "/v1/sessions/{session_id}/export")
    def export_session(self, session_id: str, *,
                       options: RequestOptions | None = None) -> bytes:
        """One session as NDJSON."""
        r = self._send("GET", f"/v1/sessions/{segment(session_id)}/export",
                       options=options)
        return r.content

    @operation("GET", "/v1/export")
    def export_tenant(self, *, options: RequestOptions | None = None) -> bytes:
        """The whole tenant as NDJSON (admin keys)."""
        r = self._send("GET", "/v1/export", options=options)
        return r.content

    @operation("POST", "/v1/import")
    def import_export(self, data: bytes, *,
                      options: RequestOptions | None = None) -> ImportResult:
        """Import an export into this tenant: all or nothing, idempotent by ids."""
        return self._request(ImportResult, "POST", "/v1/import", options=options,
                             content=data, headers={"Content-Type": NDJSON})

"""Search scope: which messages a search ranks over. Pure: no I/O.

* `session`: one session's messages.
* `agent`: every session of one agent in the tenant.
* `user`: every session with one user, optionally only one agent's of them
  (an agent key sees only its own agent's sessions of the user).
* `tenant`: every session of the tenant.

The scope also defines the BM25 statistics (N, avgdl, document frequencies), so the
same message can score differently in a session search and in a tenant-wide one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

ScopeKind = Literal["session", "agent", "user", "tenant"]


@dataclass(frozen=True, slots=True)
class SearchScope:
    """A tenant plus an optional session or agent restriction."""

    tenant_id: uuid.UUID
    session_id: uuid.UUID | None = None
    agent_id: str | None = None
    user_id: str | None = None

    @property
    def kind(self) -> ScopeKind:
        """The narrowest restriction present."""
        if self.session_id is not None:
            return "session"
        if self.user_id is not None:
            return "user"
        if self.agent_id is not None:
            return "agent"
        return "tenant"

    def params(self) -> dict[str, object]:
        """Bind parameters the repository's scope filters use."""
        params: dict[str, object] = {
            "tenant_id": self.tenant_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
        }
        if self.user_id is not None:
            params["user_id"] = self.user_id
        return params

# Generated from loom_client/_async/client.py by scripts/generate_sync.py: do not edit.
"""The synchronous Loom Memory client."""

from __future__ import annotations

from loom_client._sync.admin import AdminMixin
from loom_client._sync.contexts import ContextsMixin
from loom_client._sync.knowledge import KnowledgeMixin
from loom_client._sync.memory import MemoryMixin
from loom_client._sync.sessions import SessionsMixin
from loom_client._sync.shared_memory import SharedMemoryMixin
from loom_client._sync.users import UsersMixin


class LoomClient(SessionsMixin, MemoryMixin, SharedMemoryMixin,
                 KnowledgeMixin, UsersMixin, AdminMixin,
                 ContextsMixin):
    """Loom Memory over HTTP (synchronous): every REST operation, typed.

    ```python
    with LoomClient("http://127.0.0.1:8420", api_key, agent_id="planner") as loom:
        session = loom.create_session()
        loom.append_messages(session.id, [{"role": "user", "content": "Hi"}])
        ctx = loom.context(session.id, format="anthropic")
    ```

    Errors raise `loom_client.errors.LoomError` subclasses; lists have `iter_*`
    counterparts that follow the cursors.
    """

"""The asynchronous Loom Memory client."""

from __future__ import annotations

from loom_client._async.admin import AsyncAdminMixin
from loom_client._async.contexts import AsyncContextsMixin
from loom_client._async.knowledge import AsyncKnowledgeMixin
from loom_client._async.memory import AsyncMemoryMixin
from loom_client._async.sessions import AsyncSessionsMixin
from loom_client._async.shared_memory import AsyncSharedMemoryMixin
from loom_client._async.users import AsyncUsersMixin


class AsyncLoomClient(AsyncSessionsMixin, AsyncMemoryMixin, AsyncSharedMemoryMixin,
                      AsyncKnowledgeMixin, AsyncUsersMixin, AsyncAdminMixin,
                      AsyncContextsMixin):
    """Loom Memory over HTTP (asynchronous): every REST operation, typed.

    ```python
    async with AsyncLoomClient("http://127.0.0.1:8420", api_key, agent_id="planner") as loom:
        session = await loom.create_session()
        await loom.append_messages(session.id, [{"role": "user", "content": "Hi"}])
        ctx = await loom.context(session.id, format="anthropic")
    ```

    Errors raise `loom_client.errors.LoomError` subclasses; lists have `iter_*`
    counterparts that follow the cursors.
    """

"""Typed Python client for Loom Memory, sync (`LoomClient`) and async (`AsyncLoomClient`).

```python
from loom_client import LoomClient

with LoomClient("http://127.0.0.1:8420", api_key, agent_id="planner") as loom:
    session = loom.create_session()
    loom.append_messages(session.id, [{"role": "user", "content": "Plan the migration"}])
    ctx = loom.context(session.id, format="anthropic")
    anthropic.Anthropic().messages.create(model=..., max_tokens=1024, **ctx)
```
"""

from loom_client._async.client import AsyncLoomClient
from loom_client._async.watch import AsyncWatchStream
from loom_client._sync.client import LoomClient
from loom_client._sync.watch import WatchStream
from loom_client._wire import RequestOptions
from loom_client.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    LoomConnectionError,
    LoomError,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    PreconditionRequired,
    RateLimited,
    ServerError,
    Unauthorized,
    Unavailable,
    ValidationError,
)
from loom_client.providers import ContextParams

__version__ = "0.1.0"

__all__ = [
    "AsyncLoomClient", "AsyncWatchStream", "BadRequest", "Conflict", "ContextParams",
    "Forbidden", "LoomClient", "LoomConnectionError", "LoomError", "NotFound", "PayloadTooLarge",
    "PreconditionFailed", "PreconditionRequired", "RateLimited", "RequestOptions",
    "ServerError", "Unauthorized", "Unavailable", "ValidationError", "WatchStream",
    "__version__",
]

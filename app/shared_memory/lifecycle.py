"""Start/stop the per-process shared-memory runtime with the app (registered on import)."""

from typing import Any

from app.core.lifecycle import on_shutdown, on_startup
from app.shared_memory.runtime import SharedMemoryRuntime

_active: list[SharedMemoryRuntime] = []


def active_runtime() -> SharedMemoryRuntime | None:
    """The runtime of the app started last in this process (for hooks without a request)."""
    return _active[-1] if _active else None


@on_startup
async def start_shared_memory(app: Any) -> None:
    s = app.state.settings
    rt = SharedMemoryRuntime(app.state.redis, cache_bytes=s.shared_memory_cache_bytes,
                             watch_queue=s.shared_memory_watch_queue)
    rt.settings = s
    app.state.shared_memory = rt
    _active.append(rt)
    await rt.start()


@on_shutdown
async def stop_shared_memory(app: Any) -> None:
    rt = getattr(app.state, "shared_memory", None)
    if rt is not None:
        await rt.stop()
        if rt in _active:
            _active.remove(rt)

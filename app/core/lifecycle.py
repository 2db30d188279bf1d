"""Process-wide start/stop hooks that domains register (caches, pub/sub listeners).

Each hook is `async (app) -> None`; `create_app`'s lifespan runs them after the stores
are open and before shutting them down.
"""

from collections.abc import Awaitable, Callable
from typing import Any

Hook = Callable[[Any], Awaitable[None]]
startup_hooks: list[Hook] = []
shutdown_hooks: list[Hook] = []


def on_startup(fn: Hook) -> Hook:
    startup_hooks.append(fn)
    return fn


def on_shutdown(fn: Hook) -> Hook:
    shutdown_hooks.append(fn)
    return fn

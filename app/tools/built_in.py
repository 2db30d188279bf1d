"""The built-in tools of an app: each provider module of this domain registers its tools
into one catalog (`ToolCatalog`), imported here by name like any other module, so the
domain order (`tests/core/test_import_order.py`) sees every one of them."""

from __future__ import annotations

from app.tools import conversation, facts, shared_memory, shared_memory_defs
from app.tools.catalog import ToolCatalog

# in registration order: definitions are served in it
PROVIDERS = (conversation, shared_memory_defs, shared_memory, facts)


def catalog() -> ToolCatalog:
    """A catalog of every built-in tool (one per process, in its state)."""
    built = ToolCatalog()
    for provider in PROVIDERS:
        provider.register(built)
    return built

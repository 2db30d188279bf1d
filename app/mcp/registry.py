"""How a tool module declares its tools for `app.mcp.server`."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp_types import ToolAnnotations


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool: its function (whose typed, described parameters are the input schema; the
    name is the function's), what it does for a model, and its behaviour hints."""

    fn: Callable[..., Any]
    description: str
    annotations: ToolAnnotations

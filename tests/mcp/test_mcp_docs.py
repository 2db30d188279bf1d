"""docs/mcp.md's tool table lists every tool the MCP endpoint serves, and only those."""

import re
from pathlib import Path

from app.mcp.server import TOOLS

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def test_the_tool_table_lists_every_served_tool() -> None:
    listed = re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(), flags=re.MULTILINE)
    assert sorted(listed) == sorted(spec.fn.__name__ for spec in TOOLS)
    assert len(listed) == len(set(listed))

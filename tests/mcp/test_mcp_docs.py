"""docs/mcp.md's tool table lists every tool the MCP endpoint serves, and only those."""

import re
from pathlib import Path

from app.mcp.server import TOOLS

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def test_the_tool_table_lists_every_served_tool() -> None:
    listed = re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(), flags=re.MULTILINE)
    assert sorted(listed) == sorted(spec.fn.__name__ for spec in TOOLS)
    assert len(listed) == len(set(listed))


def test_the_transcript_lists_the_served_tools_in_order() -> None:
    """The transcript under "A session" (made by scripts/mcp_transcript.py from a real
    server) shows the tool list the server serves today, in its order."""
    doc = DOC.read_text()
    section = doc[doc.index("## A session") :]
    block = section[section.index("```text\n") : section.index("\n```", section.index("```text"))]
    listing = re.search(r"^tools: (.*?)\n\n", block, flags=re.MULTILINE | re.DOTALL)
    assert listing is not None, block[:300]
    shown = [name.strip() for name in listing.group(1).replace("\n", " ").split(",")]
    assert shown == [spec.fn.__name__ for spec in TOOLS]
    # and each call in it is one of them
    called = re.findall(r"^> ([a-z_]+) ", block, flags=re.MULTILINE)
    assert called and set(called) <= set(shown)
    assert {"search_facts", "forget_fact"} <= set(called)

"""The server's page on the package index (its long description): README.md with the links
that work only in the repository made plain text, since the index shows the README alone
(no docs/, no screenshots, no heading anchors). A hatchling metadata hook
(`[tool.hatch.metadata.hooks.custom]` in pyproject.toml); `index_readme` is pure and tested
by tests/test_packaging.py, which also checks the built wheel's METADATA.

- `[text](docs/x.md)` -> text (`docs/x.md` in the repository)
- `[text](#a-heading)` -> text
- `![alt](docs/x.png)` -> *(alt: `docs/x.png` in the repository)*

Absolute links (http, https, mailto) and fenced code blocks are left as they are.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

try:
    from hatchling.metadata.plugin.interface import MetadataHookInterface
except ImportError:  # the tests import index_readme without hatchling installed
    MetadataHookInterface = object  # type: ignore[misc,assignment]

ABSOLUTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")


def _image(m: re.Match[str]) -> str:
    alt, target = m.group(1), m.group(2)
    if ABSOLUTE.match(target):
        return m.group(0)
    return (
        f"*({alt}: `{target}` in the repository)*" if alt else f"*(`{target}` in the repository)*"
    )


def _link(m: re.Match[str]) -> str:
    text, target = m.group(1), m.group(2)
    if ABSOLUTE.match(target):
        return m.group(0)
    if target.startswith("#"):
        return text
    return f"{text} (`{target}` in the repository)"


def index_readme(markdown: str) -> str:
    """`markdown` with its repository-relative links and images made plain text (outside
    fenced code blocks)."""
    parts = re.split(r"(^(?:```|~~~).*?^(?:```|~~~)[^\n]*$)", markdown, flags=re.M | re.S)
    out = []
    for n, part in enumerate(parts):
        if n % 2 == 1:  # a fenced block, as it is
            out.append(part)
        else:
            out.append(LINK.sub(_link, IMAGE.sub(_image, part)))
    return "".join(out)


class ReadmeHook(MetadataHookInterface):  # type: ignore[misc]
    """Sets the `readme` the `[project]` table declares dynamic."""

    PLUGIN_NAME = "custom"

    def update(self, metadata: dict[str, Any]) -> None:
        text = (Path(self.root) / "README.md").read_text(encoding="utf-8")
        metadata["readme"] = {"content-type": "text/markdown", "text": index_readme(text)}

"""The modules of app/ and workers/ and what each imports, read from the source (`ast`):
every import counts, those under `TYPE_CHECKING` and inside functions too. Shared by the
import tests (tests/core/test_import_layers.py, tests/core/test_import_order.py)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of app/ and workers/."""
    out = {}
    for top in ("app", "workers"):
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def module_of(name: str) -> str | None:
    """The module of `modules()` an imported name lives in (`app.x.y.func` -> `app.x.y`)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


def imported_names(source: str) -> list[str]:
    """Every name a module's source imports, wherever the import stands."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names

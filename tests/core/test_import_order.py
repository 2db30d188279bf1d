"""The domains import one way: down the order of `docs/architecture.md`.

Every module of `app/` and `workers/` is read with `ast`; every import counts, those inside
functions and under `TYPE_CHECKING` too (a deferred import is still a dependency: it only
hides it from the import-time circle check). A module belongs to its domain (`app.facts.x`
-> `facts`; a top-level module such as `app.state` is a domain of its own). The tests fail
when a module imports a domain higher in `ORDER` than its own, or when two domains import
each other, unless `EXCEPTIONS` lists the pair with its reason; an exception that no
longer holds fails too, so the list only shrinks.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

from tests.support.imports import imported_names, module_of, modules

# Lowest first. A domain may import any domain before it, none after it.
ORDER: tuple[str, ...] = (
    "version",
    "core",
    "models",
    "llm",
    "state",
    "auth",
    "users",
    "usage",
    "sessions",
    "messages",
    "shared_memory",
    "jobs",
    "memory",
    "search",
    "context",
    "knowledge",
    "facts",
    "profiles",
    "session_resource",
    "tools",
    "manifests",
    "erasure",
    "portability",
    "mcp",
    "health",
    "console",
    "eval",
    "openapi_examples",
    "wiring",
    "api",
    "docs",
    "workers",
    "main",
    "launcher",
)

# (lower, higher): why the lower domain still imports the higher one. Empty since issue 39
# (the session resource above profiles, its row and rule in `sessions`); a new entry needs
# its reason and its way out.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _domain(module: str) -> str:
    parts = module.split(".")
    return "workers" if parts[0] == "workers" else parts[1] if len(parts) > 1 else "app"


@cache
def domain_imports() -> dict[tuple[str, str], frozenset[str]]:
    """(importing domain, imported domain) -> the modules' imports, `a.b -> c.d` each."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for name, path in modules().items():
        for imported in imported_names(path.read_text()):
            if not imported.startswith(("app.", "workers.")):
                continue
            target = module_of(imported)
            if target is not None and _domain(target) != _domain(name):
                found[(_domain(name), _domain(target))].add(f"{name} -> {target}")
    return {pair: frozenset(v) for pair, v in found.items()}


def _rank(domain: str) -> int:
    return ORDER.index(domain)


def test_every_domain_has_a_place() -> None:
    domains = {d for pair in domain_imports() for d in pair}
    assert domains - {"app"} <= set(ORDER), sorted(domains - set(ORDER))
    assert ("facts", "knowledge") in domain_imports()


def test_imports_count_wherever_they_stand() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import app.core.db\n"
        "if TYPE_CHECKING:\n"
        "    from app.models import Session\n"
        "def f():\n"
        "    from app.facts import block\n"
    )
    assert imported_names(source) == [
        "typing.TYPE_CHECKING",
        "app.core.db",
        "app.models.Session",
        "app.facts.block",
    ]


def test_imports_run_down_the_order() -> None:
    up = {
        pair: sorted(imports)
        for pair, imports in domain_imports().items()
        if _rank(pair[0]) < _rank(pair[1]) and pair not in EXCEPTIONS
    }
    assert not up, "imports that run up the order:\n" + "\n".join(
        f"{a} -> {b}: {', '.join(i)}" for (a, b), i in sorted(up.items())
    )


def test_no_two_domains_import_each_other() -> None:
    both = sorted(
        (a, b)
        for (a, b) in domain_imports()
        if a < b and (b, a) in domain_imports() and {(a, b), (b, a)}.isdisjoint(EXCEPTIONS)
    )
    assert not both, both


def test_every_exception_still_holds() -> None:
    gone = [pair for pair in EXCEPTIONS if pair not in domain_imports()]
    assert not gone, f"no longer imported, strike from EXCEPTIONS: {gone}"
    assert all(_rank(a) < _rank(b) for a, b in EXCEPTIONS), "an exception that runs down"

"""The app's modules import each other without circles, and the layers hold: `core` and
`models` at the bottom, the domains above them, the app's state and its wiring above the
domains, the launcher on top. Imports are read from the source (`ast`): every import
counts, those under `TYPE_CHECKING` and inside functions too."""

from __future__ import annotations

from functools import cache

from tests.support.imports import imported_names, module_of, modules


@cache
def imports() -> dict[str, frozenset[str]]:
    """Each module of the app and the app modules it imports."""
    out = {}
    for name, path in modules().items():
        if not name.startswith("app"):
            continue
        names = imported_names(path.read_text())
        found = {module_of(i) for i in names if i == "app" or i.startswith("app.")}
        out[name] = frozenset(m for m in found if m is not None and m != name)
    return out


def _circle(graph: dict[str, frozenset[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def _importers(target: str) -> set[str]:
    return {
        m
        for m, deps in imports().items()
        if any(d == target or d.startswith(target + ".") for d in deps)
        and not (m == target or m.startswith(target + "."))
    }


def test_the_reader_sees_the_app() -> None:
    assert "app.core.db" in imports() and "app.state" in imports()["app.main"]
    assert _circle({"a": frozenset({"b"}), "b": frozenset({"a"})}) == ["a", "b", "a"]


def test_no_import_circle_among_app_modules() -> None:
    circle = _circle(imports())
    assert circle is None, " -> ".join(circle or [])


def test_core_and_models_import_nothing_above_them() -> None:
    for name, deps in imports().items():
        if name.startswith(("app.core", "app.models")):
            above = {d for d in deps if not d.startswith(("app.core", "app.models"))}
            assert not above, f"{name} imports {sorted(above)}"


def test_only_the_launcher_and_the_app_factory_sit_on_top() -> None:
    assert _importers("app.launcher") == set()
    assert _importers("app.wiring") == {"app.main"}
    assert _importers("app.main") <= {"app.launcher.cli"}


def test_messages_declares_its_hooks_and_knows_none_of_their_implementers() -> None:
    # (its router, the HTTP edge, reads the started app's state like every router)
    for name, deps in imports().items():
        if name.startswith("app.messages") and name != "app.messages.router":
            bad = {
                d
                for d in deps
                if d.startswith(
                    (
                        "app.memory",
                        "app.jobs",
                        "app.knowledge",
                        "app.shared_memory",
                        "app.context",
                        "app.state",
                        "app.wiring",
                    )
                )
            }
            assert not bad, f"{name} imports {sorted(bad)}"

"""No module of app/ keeps a cache: caches belong to the process's lifespan state
(`app.state.Caches`, built by `app.wiring.caches` for the API process and the worker), where
erasure reaches them through one registry.

The scan reads every module's syntax tree and reports:
- a module-level container (a dict, list or set literal or comprehension; `dict()`,
  `OrderedDict()`, `defaultdict()`, `deque()`...) that a function writes to (an item
  assignment or deletion, `append`, `setdefault`, `pop`, `move_to_end`...): state that grows
  while the process serves. Building a constant at import (statements at module level) is
  not reported;
- a module-level instance of a cache-like class (`...Cache`, `...Reads`, `...LRU`,
  `...Writer`, `StandIns`);
- a module-level function memoised with `functools.cache` / `lru_cache`;
- a `global` statement (a module name rebound at run time).

What it reports must be on `ALLOWED` with the reason it is no cache of tenant data (or on
`KNOWN`, debts with an owner); anything new fails this test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

MUTABLE_CALLS = {
    "dict",
    "list",
    "set",
    "OrderedDict",
    "defaultdict",
    "deque",
    "Counter",
    "WeakValueDictionary",
    "WeakKeyDictionary",
    "WeakSet",
}
MUTATORS = {
    "append",
    "appendleft",
    "add",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "clear",
    "move_to_end",
    "extend",
    "insert",
    "remove",
    "discard",
    "__setitem__",
}
CACHE_CLASS = re.compile(r"(Cache|Caches|Reads|LRU|Writer|StandIns)$")

# module (relative to app/) : name -> why it is not a cache of the process's data
ALLOWED: dict[str, str] = {
    # process configuration, set once at start by app.wiring.configure (API and worker)
    "core/jsonlimits.py:_max_depth": "LOOM_MAX_JSON_DEPTH, set by wiring.configure",
    "core/pagination.py:_key": "the cursor signing key, set by wiring.configure",
    "knowledge/filters.py:MAX_LIST_VALUES": "LOOM_FILTER_MAX_VALUES, set by wiring.configure",
    "core/config.py:get_settings": "the environment's settings, read once",
    # a fact about the process's one database, learned from its first connection
    "core/pg.py:_on_citus": "whether the database is a Citus coordinator (app.core.citus)",
    "search/repository.py:_PROBE": "the seeds' probe statement text per scope kind (no values)",
    "core/pg.py:_positional_cached": "composed statements' text numbered for asyncpg (no values)",
    # memos of code, not of data: the same for every tenant, bounded by the code
    "core/tokens.py:encoding": "the tokenizer, loaded once",
    "core/query_params.py:_DECLARED": "each route's declared query names (one per route)",
    "memory/repository.py:_read_sql": "the memory read's statement text per window kind",
    "search/repository.py:_BM25": "the ranking statement text per scope kind and window",
    "context/builder.py:_note_base_tokens": "the tokens of the empty recall note",
    "portability/checks.py:_columns": "per table, the checks of its columns",
    "manifests/hashes.py:tokenizer_info": "the tokenizer's name and package versions",
    "erasure/service.py:_key": "the erasure HMAC key derived from the settings' secrets",
}

# debts with an owner: reported, allowed until their owner moves them to app.state.Caches
KNOWN: dict[str, str] = {}


def _callee(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    return f.attr if isinstance(f, ast.Attribute) else ""


def _is_container(value: ast.expr | None) -> bool:
    literal = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
    return isinstance(value, literal) or (
        isinstance(value, ast.Call) and _callee(value) in MUTABLE_CALLS
    )


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def findings(source: str, module: str) -> dict[str, str]:
    """`module:name` -> what was found, for one module's source."""
    tree = ast.parse(source, module)
    found: dict[str, str] = {}
    containers: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        for t in targets:
            if not isinstance(t, ast.Name):
                continue
            if _is_container(value):
                containers.add(t.id)
            elif isinstance(value, ast.Call) and CACHE_CLASS.search(_callee(value)):
                found[f"{module}:{t.id}"] = "a cache instance"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                n = d.func if isinstance(d, ast.Call) else d
                name = n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
                if name in ("cache", "lru_cache"):
                    found[f"{module}:{node.name}"] = "a memoised function"
    for fn in _functions(tree):
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Global):
                for name in sub.names:
                    found[f"{module}:{name}"] = "rebound through global"
            targets = []
            if isinstance(sub, (ast.Assign, ast.Delete)):
                targets = sub.targets
            elif isinstance(sub, ast.AugAssign):
                targets = [sub.target]
            for t in targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and t.value.id in containers
                ):
                    found[f"{module}:{t.value.id}"] = "a module container written to"
            if (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr in MUTATORS
                and isinstance(sub.func.value, ast.Name)
                and sub.func.value.id in containers
            ):
                found[f"{module}:{sub.func.value.id}"] = "a module container written to"
    return found


def scan() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(APP.rglob("*.py")):
        found.update(findings(path.read_text(), path.relative_to(APP).as_posix()))
    return found


def test_no_module_of_app_keeps_a_cache() -> None:
    unexplained = {k: v for k, v in scan().items() if k not in ALLOWED and k not in KNOWN}
    assert unexplained == {}, (
        "module-level state: make it a field of app.state.Caches (app.wiring.caches), "
        f"or explain it in ALLOWED: {unexplained}"
    )


def test_the_allow_list_has_nothing_stale() -> None:
    stale = (set(ALLOWED) | set(KNOWN)) - set(scan())
    assert stale == set(), f"no longer found, remove from the lists: {sorted(stale)}"


def test_the_scan_finds_the_caches_that_were_there() -> None:
    """What the scan reports on the shapes the caches had before they moved to the
    lifespan state (issue 39)."""
    before = """
from collections import OrderedDict
import functools

_STAND_INS: OrderedDict[str, int] = OrderedDict()
_CACHE = _RecentReads(1000, 300.0)
_WRITERS: dict[int, object] = {}
_down_until: dict[int, float] = {}
TABLE = {"a": 1}
TABLE["b"] = 2  # a constant built at import: not reported

def stand_in(key):
    _STAND_INS[key] = 1
    _STAND_INS.move_to_end(key)

def writer_for(pool):
    return _WRITERS.setdefault(id(pool), object())

def failed(redis):
    _down_until[id(redis)] = 1.0

def read():
    return TABLE["a"]

@functools.lru_cache(maxsize=8)
def memo(x):
    return x

_loaded = False

def load():
    global _loaded
    _loaded = True
"""
    assert findings(before, "m.py") == {
        "m.py:_STAND_INS": "a module container written to",
        "m.py:_CACHE": "a cache instance",
        "m.py:_WRITERS": "a module container written to",
        "m.py:_down_until": "a module container written to",
        "m.py:memo": "a memoised function",
        "m.py:_loaded": "rebound through global",
    }

"""One way to the database (issue 44): every domain runs SQL text on an asyncpg connection
(`app.auth.deps.DbDep` for a route, `app.core.db.transaction` or a pool's connection
elsewhere) and reads typed rows. SQLAlchemy and SQLModel describe the schema only: the
table models (app/models) and what reads them or runs DDL at migration time."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# the modules that may import SQLAlchemy or SQLModel, and why
SCHEMA = {
    "app/core/citus.py": "distributes the schema when `migrate` runs (alembic's connection)",
    "app/core/partitions.py": "partitions the hot tables when `migrate` runs",
    "app/portability/checks.py": "derives the import's column checks from the table models",
    "app/launcher/migrate.py": "runs Alembic's migrations (`loom-memory migrate`)",
}
# what no module names: the ORM's handles and the old bridges to them
GONE = ("AsyncSession", "async_sessionmaker", "sessionmaker", "driver_connection",
        "connection_of", "engine_connection", "create_async_engine")  # fmt: skip


def _modules() -> list[Path]:
    return sorted(p for d in ("app", "workers") for p in (ROOT / d).rglob("*.py"))


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_schema_imports_sqlalchemy() -> None:
    offenders = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("app/models/") or rel in SCHEMA:
            continue
        if _imports(ast.parse(path.read_text())) & {"sqlalchemy", "sqlmodel", "alembic"}:
            offenders.append(rel)
    assert offenders == [], f"SQLAlchemy outside the schema: {offenders}"
    stale = [
        m
        for m in SCHEMA
        if not _imports(ast.parse((ROOT / m).read_text())) & {"sqlalchemy", "alembic"}
    ]
    assert stale == [], f"listed in SCHEMA but importing no SQLAlchemy: {stale}"


def test_no_module_names_a_session_or_a_bridge_to_one() -> None:
    named = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            if isinstance(node, ast.Name | ast.Attribute) and name in GONE:
                named.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {name}")
    assert named == []


def test_a_route_gets_an_asyncpg_connection() -> None:
    import typing

    import asyncpg

    from app.auth.deps import DbDep

    assert typing.get_args(DbDep)[0] is asyncpg.Connection

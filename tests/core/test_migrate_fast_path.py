"""`serve` starts without Alembic when the database is at the latest schema (issue 44,
finding 5): the scripts' heads are read from their text (`script_heads`), equal to what
Alembic computes, and a quick migrate of a database at them imports nothing of Alembic."""

from __future__ import annotations

import subprocess
import sys

from app.launcher.migrate import heads, script_heads
from tests.support.databases import fresh_database, url_of


def test_the_scripts_heads_read_from_their_text_are_alembics() -> None:
    assert script_heads() == heads()


def _quick(url: str) -> str:
    code = (
        "import sys; from app.launcher.migrate import migrate; "
        f"m = migrate({url!r}, quick=True); "
        "print(m.line(), '|', 'alembic' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return out.stdout.strip()


def test_a_quick_migrate_runs_alembic_only_when_there_is_something_to_do() -> None:
    with fresh_database("loom_quick") as name:
        url = url_of(name)
        first = _quick(url)  # an empty database: migrated, with Alembic
        assert first.startswith("migrated from an empty database"), first
        assert first.endswith("| True"), first
        again = _quick(url)  # at the heads: nothing imported, nothing run
        assert again == f"already at {', '.join(heads())}, the latest schema | False", again

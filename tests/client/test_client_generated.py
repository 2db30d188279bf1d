"""The sync client (`loom_client/_sync/`) is what `scripts/generate_sync.py` makes of the
async one: edit `_async/` and regenerate, never `_sync/` by hand."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "clients" / "python" / "scripts" / "generate_sync.py"


def test_sync_client_is_generated_from_async() -> None:
    spec = importlib.util.spec_from_file_location("generate_sync", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    files = module.generate()
    assert files, "no async sources found"
    stale = [str(p) for p, text in files.items() if not p.exists() or p.read_text() != text]
    extra = [str(p) for p in module.TARGET.glob("*.py") if p not in files]
    assert stale == [] and extra == [], (
        "loom_client/_sync is stale: run `python clients/python/scripts/generate_sync.py`"
    )

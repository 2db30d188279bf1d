"""Every operation of openapi/openapi.json has a client method, sync and async, and no
client method names an operation the document does not have. Run with `-s` to see the
coverage table."""

import json
from pathlib import Path

from loom_client import AsyncLoomClient, LoomClient
from loom_client.operations import operations_of

ROOT = Path(__file__).resolve().parents[2]
METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}


def document_operations() -> dict[tuple[str, str], str]:
    doc = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    return {
        (method.upper(), path): op.get("operationId", "")
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    }


def test_every_operation_has_a_client_method() -> None:
    documented = document_operations()
    sync, async_ = operations_of(LoomClient), operations_of(AsyncLoomClient)
    rows = [
        (
            f"{method} {path}",
            documented[(method, path)],
            ", ".join(sync.get((method, path), [])) or "MISSING",
            "same"
            if sync.get((method, path)) == async_.get((method, path))
            else ", ".join(async_.get((method, path), [])) or "MISSING",
        )
        for method, path in sorted(documented, key=lambda op: (op[1], op[0]))
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print(
        f"\n{'operation':<{widths[0]}}  {'operationId':<{widths[1]}}  "
        f"{'LoomClient':<{widths[2]}}  AsyncLoomClient"
    )
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
    print(f"{len(documented)} operations; {sum(len(v) for v in sync.values())} sync methods")
    for client in (sync, async_):
        assert sorted(set(documented) - set(client)) == [], "operations without a method"
        assert sorted(set(client) - set(documented)) == [], "methods of unknown operations"
    assert sync == async_

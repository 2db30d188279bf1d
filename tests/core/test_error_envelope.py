"""The error envelope is built in one place (`app.core.errors.envelope`)."""

import ast
from pathlib import Path

from app.core.errors import ErrorEnvelope, envelope

APP = Path(__file__).resolve().parents[2] / "app"


def _builds_envelope(node: ast.AST) -> bool:
    """A dict literal `{"error": {"code": ...}}`."""
    return isinstance(node, ast.Dict) and any(
        isinstance(k, ast.Constant)
        and k.value == "error"
        and isinstance(v, ast.Dict)
        and any(isinstance(kk, ast.Constant) and kk.value == "code" for kk in v.keys)
        for k, v in zip(node.keys, node.values, strict=True)
    )


def test_only_errors_py_builds_the_envelope() -> None:
    builders = sorted(
        str(path.relative_to(APP.parent))
        for path in APP.rglob("*.py")
        if any(_builds_envelope(n) for n in ast.walk(ast.parse(path.read_text())))
    )
    assert builders == ["app/core/errors.py"]


def test_envelope_is_the_documented_model() -> None:
    body = envelope("not_found", "No such thing.", {"id": 1})
    assert ErrorEnvelope.model_validate(body).model_dump() == body
    assert envelope("x", "y") == {"error": {"code": "x", "message": "y", "details": None}}

"""Every success response of the OpenAPI document has an example (so ReDoc and Swagger UI
show real shapes, not `"string"`), and each JSON example is valid against its own schema."""

from typing import Any

import jsonschema
import pytest

from app.core.config import Settings
from app.main import create_app
from app.openapi_examples import UUID, example


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return create_app(Settings()).openapi()


def success_bodies(doc: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    out = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            for status, response in op["responses"].items():
                if status.startswith("2"):
                    for media, content in (response.get("content") or {}).items():
                        out.append((f"{method.upper()} {path}", status, media, content))
    return out


def test_every_operation_shows_an_example_of_its_success_response(doc: dict[str, Any]) -> None:
    bodies = success_bodies(doc)
    for where, status, media, content in bodies:
        assert "example" in content or "examples" in content, (where, status, media)
    with_body = {where for where, *_ in bodies}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if f"{method.upper()} {path}" not in with_body:  # only 204s have no body
                assert set(op["responses"]) & {"204"}, (method, path)


def test_the_json_examples_fit_their_schemas(doc: dict[str, Any]) -> None:
    checked = 0
    for where, status, media, content in success_bodies(doc):
        if not media.endswith("json") or "example" not in content:
            continue
        schema = {**content["schema"], "components": doc["components"]}
        try:
            jsonschema.validate(content["example"], schema, cls=jsonschema.Draft202012Validator)
        except jsonschema.ValidationError as exc:
            pytest.fail(f"{where} {status}: {exc.message} at {list(exc.absolute_path)}")
        checked += 1
    assert checked > 40


def test_values_fit_the_field() -> None:
    schemas = {
        "S": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "format": "uuid"},
                "role": {"type": "string"},
                "token_count": {"type": "integer", "minimum": 0},
                "kind": {"enum": ["a", "b"]},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        }
    }
    assert example({"$ref": "#/components/schemas/S"}, schemas) == {
        "id": UUID,
        "role": "user",
        "token_count": 128,
        "kind": "a",
        "note": "note",
        "tags": ["tag"],
    }

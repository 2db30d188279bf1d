"""An example for every success response of the OpenAPI document (pure: no I/O).

Without one, ReDoc and Swagger UI render a response from its schema alone: every string is
`"string"` and every id `"3fa85f64-..."` at best. `complete(doc)` gives each 2xx JSON
response that has no example one built from its schema: declared examples, defaults,
enum values and consts first, then values that fit the field's name and format (a session
id is a UUID, `role` is `user`, a `created_at` a time, token counts are counts). Responses
that declare their own examples keep them; bodies that are not JSON get one for their media
type (the Prometheus text of /metrics, an SSE stream, bytes).
"""

from __future__ import annotations

import re
from typing import Any

UUID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"
TIME = "2026-11-25T12:00:00Z"
MAX_DEPTH = 8

# by field name (exact, then suffix), for strings without a format, enum or example
_STRINGS = {
    "role": "user",
    "agent_id": "research-assistant",
    "name": "research-assistant",
    "text": "The otter swam upstream to the old mill.",
    "content": "Where did the otter go?",
    "query": "where did the otter go",
    "method": "llm",
    "status": "succeeded",
    "key": "notes/otters",
    "namespace": "global",
    "secret": "lm_5b0c1f...",
    "prefix": "lm_5b0c",
    "next_cursor": "eyJhZnRlcl9zZXEiOjUwfQ",
    "cursor": "eyJhZnRlcl9zZXEiOjUwfQ",
    "kind": "compression",
    "trigger": "usage",
    "format": "anthropic",
    "scope": "session",
    "title": "Otters",
    "description": "What the team knows about otters.",
    "version": "0.1.0",
    "code": "session_not_found",
    "message": "No such session.",
    "tool_use_id": "toolu_01",
    "last_error": "",
    "etag": '"3"',
    "summary": "The user asked about otters.",
    "content_type": "application/json",
    "checksum": "sha256:2c26b46b68ffc68f",
}
_SUFFIXES = (
    ("_at", TIME),
    ("agent_id", "research-assistant"),
    ("_id", UUID),
    ("_text", "The user asked about otters."),
    ("_name", "research-assistant"),
    ("_url", "https://example.com/loom"),
)
# free-form objects (and untyped fields) by name
_OBJECTS: dict[str, Any] = {
    "messages": {"role": "user", "content": "Where did the otter go?"},
    "tool": {
        "name": "recall_messages",
        "description": "Read messages of this conversation by seq.",
        "input_schema": {"type": "object"},
    },
    "message": {"role": "user", "content": "Where did the otter go?"},
    "system": [{"type": "text", "text": "You are a research assistant."}],
    "tools": {
        "name": "recall_messages",
        "description": "Read messages of this conversation by seq.",
        "input_schema": {"type": "object"},
    },
    "metadata": {"source": "chat"},
    "value": {"species": "otter", "count": 2},
    "input": {"query": "otters"},
    "config": {"max_context_tokens": 8000},
}
_INTEGERS = (
    ("seq", 42),
    ("token", 128),
    ("count", 3),
    ("limit", 50),
    ("budget", 8000),
    ("bytes", 2048),
    ("size", 2048),
    ("version", 3),
    ("attempts", 1),
    ("runs", 1),
)
_FORMATS = {
    "uuid": UUID,
    "date-time": TIME,
    "date": "2026-11-25",
    "uri": "https://example.com",
    "email": "ops@example.com",
    "binary": "<bytes>",
}
_METRICS = (
    "# HELP http_requests_total Total number of requests by method, status and "
    "handler.\n# TYPE http_requests_total counter\n"
    'http_requests_total{handler="/healthz",method="GET",status="200"} 3.0\n'
)
_NON_JSON = {
    "text/plain": "The otter swam upstream to the old mill.",
    "text/event-stream": 'event: put\nid: 3\ndata: {"key": "notes/otters", "version": 3}\n\n',
    "application/octet-stream": "<bytes>",
    "*/*": "<the stored bytes>",
}


def complete(doc: dict[str, Any]) -> dict[str, Any]:
    """Add the missing examples of the success responses, in place; returns `doc`."""
    schemas = doc.get("components", {}).get("schemas", {})
    for path, item in doc.get("paths", {}).items():
        for op in item.values():
            if not isinstance(op, dict):
                continue
            for status, response in op.get("responses", {}).items():
                if not str(status).startswith("2"):
                    continue
                for media, content in (response.get("content") or {}).items():
                    if "example" in content or "examples" in content:
                        continue
                    schema = content.get("schema")
                    if media.endswith("json") and schema:
                        content["example"] = example(schema, schemas)
                    elif path == "/metrics":
                        content["example"] = _METRICS
                    elif media in _NON_JSON:
                        content["example"] = _NON_JSON[media]
    return doc


def _resolve(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        return dict(schemas.get(ref.rsplit("/", 1)[1], {}))
    return schema


def example(schema: dict[str, Any], schemas: dict[str, Any], name: str = "", depth: int = 0) -> Any:
    """A value that fits `schema` (its `$ref`s resolved in `schemas`), for a field `name`."""
    schema = _resolve(schema, schemas)
    if "example" in schema:
        return schema["example"]
    if schema.get("examples"):
        found = schema["examples"]
        return found[0] if isinstance(found, list) else next(iter(found.values()))
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if schema.get("default") is not None:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if _resolve(o, schemas).get("type") != "null"]
            return example(options[0], schemas, name, depth) if options else None
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = example(part, schemas, name, depth)
            if not isinstance(value, dict):
                return value
            merged.update(value)
        return merged
    kind = schema.get("type")
    if name in _OBJECTS and (kind in (None, "object") and not schema.get("properties")):
        return _OBJECTS[name]
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        if depth >= MAX_DEPTH:
            return {}
        out = {
            prop: example(sub, schemas, prop, depth + 1)
            for prop, sub in schema.get("properties", {}).items()
        }
        extra = schema.get("additionalProperties")
        if not out and isinstance(extra, dict) and extra:
            out = {"key": example(extra, schemas, "", depth + 1)}
        return out
    if kind == "array":
        if depth >= MAX_DEPTH:
            return []
        return [example(schema.get("items", {}), schemas, _singular(name), depth + 1)]
    if kind == "string":
        return _string(schema, name)
    if kind == "integer":
        return _integer(schema, name)
    if kind == "number":
        return 0.5 if "usage" in name or "share" in name else 7.25
    if kind == "boolean":
        return False
    return None


def _singular(name: str) -> str:
    return name[:-1] if name.endswith("s") else name


def _string(schema: dict[str, Any], name: str) -> str:
    fmt = schema.get("format")
    if fmt in _FORMATS:
        return _FORMATS[fmt]
    if name in _STRINGS:
        return _STRINGS[name]
    for suffix, value in _SUFFIXES:
        if name.endswith(suffix):
            return value
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and re.fullmatch(r"\^?\[a-z0-9_.-\]\+\$?", pattern):
        return "research-assistant"
    return name.replace("_", " ") if name else "text"


def _integer(schema: dict[str, Any], name: str) -> int:
    for part, value in _INTEGERS:
        if part in name:
            return max(value, int(schema.get("minimum", value)))
    return int(schema.get("minimum", 1))

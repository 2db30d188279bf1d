"""Definitions of the shared-memory tools; their handlers live in app/tools/shared_memory.py.

Served by GET /v1/sessions/{id}/tools whether or not the handlers are installed; a call
to a tool without a handler answers TOOL_UNAVAILABLE. The shared-memory module may
re-register a definition to refine it (last registration wins).
"""

from app.core.pagination import INT64_MAX
from app.shared_memory.ttl import MAX_TTL_SECONDS, MIN_TTL_SECONDS
from app.tools.catalog import ToolCatalog

_NAMESPACES = ["global", "workflow", "swarm", "debate", "session", "agent"]
_NAMESPACE = {
    "type": "string",
    "enum": _NAMESPACES,
    "description": (
        "`agent`: private to you (no scope_id). `global`: the whole tenant (no scope_id). "
        "`workflow`, `swarm`, `debate`, `session`: shared within `scope_id`."
    ),
}
_SCOPE_ID = {"type": "string", "description": "Required for workflow/swarm/debate/session."}
_KEY = {"type": "string", "minLength": 1, "maxLength": 256}


def register(catalog: ToolCatalog) -> None:
    """The shared-memory tools' definitions (`app.tools.built_in.catalog`)."""
    catalog.register_tool(
        "shared_memory_read",
        {
            "description": "Read a value from shared memory.",
            "input_schema": {
                "type": "object",
                "properties": {"namespace": _NAMESPACE, "key": _KEY, "scope_id": _SCOPE_ID},
                "required": ["namespace", "key"],
                "additionalProperties": False,
            },
        },
    )
    catalog.register_tool(
        "shared_memory_write",
        {
            "description": "Write a JSON value to shared memory (creates or replaces it). Pass "
            "`if_version` to replace only the version you read.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "namespace": _NAMESPACE,
                    "key": _KEY,
                    "scope_id": _SCOPE_ID,
                    "value": {"description": "Any JSON value."},
                    "ttl_seconds": {
                        "type": "integer",
                        "minimum": MIN_TTL_SECONDS,
                        "maximum": MAX_TTL_SECONDS,
                    },
                    "if_version": {"type": "integer", "minimum": 0, "maximum": INT64_MAX},
                },
                "required": ["namespace", "key", "value"],
                "additionalProperties": False,
            },
        },
    )
    catalog.register_tool(
        "shared_memory_list",
        {
            "description": "List keys in a shared-memory namespace, optionally under a prefix.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "namespace": _NAMESPACE,
                    "scope_id": _SCOPE_ID,
                    "prefix": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200},
                },
                "required": ["namespace"],
                "additionalProperties": False,
            },
        },
    )
    catalog.register_tool(
        "shared_memory_delete",
        {
            "description": "Delete a value from shared memory.",
            "input_schema": {
                "type": "object",
                "properties": {"namespace": _NAMESPACE, "key": _KEY, "scope_id": _SCOPE_ID},
                "required": ["namespace", "key"],
                "additionalProperties": False,
            },
        },
    )

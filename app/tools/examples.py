"""Request examples of the tools API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

TOOL_CALL: dict[str, Example] = {
    "search_conversation": Example(
        summary="The model searches the conversation",
        description="A `tool_use` block as the model returned it; the answer is the "
        "`tool_result` block to send back.",
        value={
            "type": "tool_use",
            "id": "toolu_01HXm8CkTq4Lz9VbYw2Rj6Dn",
            "name": "search_conversation",
            "input": {"query": "billing database migration decision", "limit": 5},
        },
    ),
    "shared_memory_write": Example(
        summary="The model writes to a workflow's shared memory",
        value={
            "type": "tool_use",
            "id": "toolu_01PzK3Fq8Wm2Ys7Tn4Vc1Lb9",
            "name": "shared_memory_write",
            "input": {
                "namespace": "workflow",
                "scope_id": "billing-migration",
                "key": "plan/status",
                "value": {"phase": 2, "blocked_on": "schema review"},
            },
        },
    ),
}

"""Request examples of the context API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

BUILD: dict[str, Example] = {
    "anthropic": Example(
        summary="Anthropic Messages API shape",
        description="`system` blocks (ROM and Kernel marked for prompt caching), "
        "`messages` and `tools`, ready for `messages.create`.",
        value={"format": "anthropic"},
    ),
    "openai_with_recall": Example(
        summary="OpenAI shape, recalling old turns for this build",
        description="Searches the swap for the query and places the best old turns before "
        "L1, within a tenth of the budget.",
        value={
            "format": "openai",
            "recall": {
                "enabled": True,
                "share": 0.1,
                "max_messages": 12,
                "query": "billing database migration decision",
            },
        },
    ),
    "raw": Example(summary="Every layer separately (for debugging)", value={"format": "raw"}),
}

"""Request examples of the messages API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

# One agent turn with a tool call, in each accepted shape. The tool is the built-in
# `search_conversation` (GET /v1/sessions/{id}/tools), so the turn reads as a real loop.
APPEND: dict[str, Example] = {
    "anthropic_turn": Example(
        summary="An agent turn with a tool call (Anthropic shape)",
        description="The user asks, the assistant calls a tool, the tool result comes back "
        "in a user message, the assistant answers. Stored as four messages: "
        "user, assistant (with `tool_calls`), tool, assistant.",
        value={
            "messages": [
                {
                    "role": "user",
                    "content": "What did we decide about the billing database migration?",
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me check our earlier conversations."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01HXm8CkTq4Lz9VbYw2Rj6Dn",
                            "name": "search_conversation",
                            "input": {"query": "billing database migration decision", "limit": 5},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_01HXm8CkTq4Lz9VbYw2Rj6Dn",
                            "content": "seq 41 (2024-05-02): migrate billing to PostgreSQL 16 "
                            "in two phases; writes freeze for at most 10 minutes.",
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": "We decided to move billing to PostgreSQL 16 in two phases, with "
                    "a write freeze of at most 10 minutes.",
                },
            ]
        },
    ),
    "openai_turn": Example(
        summary="The same turn (OpenAI shape)",
        description="Assistant `tool_calls` with JSON `arguments`, and a `tool` message "
        "naming the call; stored exactly like the Anthropic shape.",
        value={
            "messages": [
                {
                    "role": "user",
                    "content": "What did we decide about the billing database migration?",
                },
                {
                    "role": "assistant",
                    "content": "Let me check our earlier conversations.",
                    "tool_calls": [
                        {
                            "id": "call_7QeZr1uN3bKd",
                            "type": "function",
                            "function": {
                                "name": "search_conversation",
                                "arguments": '{"query": "billing database migration decision", '
                                '"limit": 5}',
                            },
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_7QeZr1uN3bKd",
                    "content": "seq 41 (2024-05-02): migrate billing to PostgreSQL 16 in two "
                    "phases; writes freeze for at most 10 minutes.",
                },
                {
                    "role": "assistant",
                    "content": "We decided to move billing to PostgreSQL 16 in two phases, with "
                    "a write freeze of at most 10 minutes.",
                },
            ]
        },
    ),
    "imported_history": Example(
        summary="Imported history with its original times",
        value={
            "messages": [
                {
                    "role": "user",
                    "content": "Can we freeze billing writes on Saturday night?",
                    "created_at": "2024-05-02T21:14:05Z",
                    "metadata": {"source": "slack"},
                },
                {
                    "role": "assistant",
                    "content": "Yes: the Saturday 23:00 UTC window is free.",
                    "created_at": "2024-05-02T21:14:31Z",
                    "metadata": {"source": "slack"},
                },
            ]
        },
    ),
}

"""Request examples of the memory and Kernel API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

PROMOTE: dict[str, Example] = {
    "range": Example(
        summary="Bring back an old stretch of the conversation",
        value={"start_seq": 12, "end_seq": 18},
    ),
    "seqs": Example(summary="Bring back a few messages by seq", value={"seqs": [3, 4, 9]}),
}

KERNEL_TOOLS: dict[str, Example] = {
    "sql_and_ticket": Example(
        summary="The agent's own tools (Anthropic tool definitions)",
        value={
            "tools": [
                {
                    "name": "run_sql",
                    "description": "Run a read-only SQL query on the billing replica.",
                    "input_schema": {
                        "type": "object",
                        "required": ["query"],
                        "properties": {
                            "query": {"type": "string", "description": "One SELECT statement."},
                            "timeout_ms": {"type": "integer", "minimum": 100, "maximum": 30000},
                        },
                    },
                },
                {
                    "name": "update_ticket",
                    "description": "Add a comment to an OPS ticket.",
                    "input_schema": {
                        "type": "object",
                        "required": ["ticket", "comment"],
                        "properties": {"ticket": {"type": "string"}, "comment": {"type": "string"}},
                    },
                },
            ]
        },
    ),
}

KERNEL_SCHEMA: dict[str, Example] = {
    "table": Example(
        summary="A table's columns, kept at hand for the model",
        value={
            "schema": {
                "table": "invoices",
                "primary_key": ["id"],
                "columns": {
                    "id": "uuid",
                    "customer_id": "uuid",
                    "amount_cents": "bigint",
                    "currency": "char(3)",
                    "status": "text",
                    "issued_at": "timestamptz",
                },
            }
        },
    ),
}

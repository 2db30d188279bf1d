"""Request examples of the agent profile API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

PROFILE: dict[str, Example] = {
    "planner": Example(
        summary="The planning agent's system prompt, patterns and backend schema",
        value={
            "system_prompt": "You are the planning agent of the billing team. Answer with "
            "numbered steps, name an owner for each, and say how to roll "
            "back.",
            "patterns": [
                {"when": "asked for a plan", "do": "list steps, owners and a rollback"},
                {
                    "when": "a step touches production data",
                    "do": "ask for a maintenance window first",
                },
            ],
            "backend_schema": {"tables": ["invoices", "customers", "payments"]},
        },
    ),
}

"""Request examples of the sessions API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

CREATE: dict[str, Example] = {
    "session_config": Example(
        summary="A session with its memory config",
        description="The agent is the caller's (an agent key's own, or a service key's "
        "`X-Agent-Id`); the ROM is the agent profile's current version.",
        value={
            "config": {
                "max_context_tokens": 200_000,
                "reserved_output_tokens": 8_000,
                "l1_max_messages": 40,
                "knowledge": {"project_id": "billing-migration", "share": 0.1},
                "recall": {"enabled": True, "share": 0.1, "max_messages": 12},
            },
            "metadata": {"ticket": "OPS-4812", "channel": "slack"},
        },
    ),
    "inline_rom": Example(
        summary="A session for a named agent, with an inline ROM",
        value={
            "agent_id": "planner",
            "config": {"max_context_tokens": 128_000},
            "rom": {
                "system_prompt": "You are the planning agent of the billing team. "
                "Answer with numbered steps and name an owner for "
                "each."
            },
        },
    ),
}

UPDATE: dict[str, Example] = {
    "config_and_metadata": Example(
        summary="Keep more recent messages verbatim and replace the metadata",
        value={
            "config": {"l1_max_messages": 60},
            "metadata": {"ticket": "OPS-4812", "priority": "high"},
        },
    ),
}

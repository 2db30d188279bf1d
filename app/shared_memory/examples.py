"""Request examples of the shared memory API (shown in /docs; the first is the default).

Raw OpenAPI Example Objects: the PUT body is declared by hand (router.PUT_BODY), one media
type each.
"""

from typing import Any

PUT_JSON: dict[str, Any] = {
    "workflow_status": {
        "summary": "A workflow's status, kept for a day",
        "description": "Under namespace `workflow` with `scope_id` the workflow's id, e.g. "
        "PUT /v1/shared-memory/workflow/plan/status?scope_id=billing-migration.",
        "value": {
            "value": {
                "phase": 2,
                "owner": "planner",
                "blocked_on": ["schema review"],
                "next_window": "2024-05-11T23:00:00Z",
            },
            "metadata": {"source": "planner", "ticket": "OPS-4812"},
            "ttl_seconds": 86_400,
        },
    },
    "agent_preferences": {
        "summary": "An agent's private notes (namespace `agent`, no scope_id)",
        "value": {
            "value": {"preferred_window": "Saturday 23:00 UTC", "avoid": ["month-end close"]}
        },
    },
}

PUT_TEXT: dict[str, Any] = {
    "note": {
        "summary": "A plain-text value (metadata in X-Loom-Metadata)",
        "value": "Phase 2 waits for the schema review; replica lag must stay under 5 s.",
    },
}

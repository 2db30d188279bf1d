"""Request examples of the search API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

SESSION: dict[str, Example] = {
    "decision": Example(
        summary="Find an earlier decision in this session",
        value={"query": "billing migration write freeze", "limit": 5, "rerank": True},
    ),
    "dated_and_promoted": Example(
        summary="Only May 2024, and put the hits back into the context",
        value={
            "query": "replica lag before phase 2",
            "limit": 5,
            "after": "2024-05-01T00:00:00Z",
            "before": "2024-06-01T00:00:00Z",
            "promote": True,
        },
    ),
}

SESSIONS: dict[str, Example] = {
    "this_agent": Example(
        summary="Across the caller's agent's sessions",
        description="`scope=agent` searches the caller's effective agent (an agent key's "
        "own, or a service key's `X-Agent-Id`) unless `agent_id` names one.",
        value={"query": "billing migration write freeze", "scope": "agent", "limit": 10},
    ),
    "tenant": Example(
        summary="Across the whole tenant, plain BM25 (service and admin keys)",
        value={
            "query": "PostgreSQL 16 upgrade",
            "scope": "tenant",
            "ranking": "message",
            "limit": 10,
            "rerank": False,
        },
    ),
}

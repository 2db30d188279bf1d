"""Request examples of the knowledge API (shown in /docs; the first is the default)."""

from fastapi.openapi.models import Example

_DECISION = (
    "Billing moves to PostgreSQL 16 in two phases; writes freeze for at most 10 "
    "minutes, in the Saturday 23:00 UTC window."
)

ITEM: dict[str, Example] = {
    "project_decision": Example(
        summary="A decision the whole project should remember",
        value={
            "scope": "project/billing-migration",
            "kind": "decision",
            "tags": ["database", "migration"],
            "importance": 0.8,
            "text": _DECISION,
            "payload": {"decided_on": "2024-05-02", "owner": "planner", "ticket": "OPS-4812"},
        },
    ),
    "task_note": Example(
        summary="A working note of one task",
        value={
            "scope": "task/OPS-4812",
            "kind": "note",
            "tags": ["runbook"],
            "importance": 0.4,
            "text": "Replica lag must be under 5 s before phase 2 starts.",
        },
    ),
}

QUERY: dict[str, Example] = {
    "important_decisions": Example(
        summary="The project's important decisions, most important first",
        value={
            "filters": {
                "scope": "project/billing-migration",
                "kind": "decision",
                "importance": {"$gte": 0.5},
                "tags": ["migration"],
            },
            "order_by": "importance",
            "limit": 20,
        },
    ),
}

CLEAR: dict[str, Example] = {
    "task_notes": Example(
        summary="Clear a task's notes (other kinds stay)",
        value={"scope": "task/OPS-4812", "filters": {"kind": "note"}},
    ),
}

PROMOTE: dict[str, Example] = {
    "to_project": Example(
        summary="Promote a task item to its project", value={"project_id": "billing-migration"}
    ),
}

TASK_COMPLETE: dict[str, Example] = {
    "keep_one": Example(
        summary="Keep one item in the project, clear the rest of the task",
        value={
            "promote": ["0b6f1c1e-8d4e-4c55-9a51-3f0b2a7d9c12"],
            "project_id": "billing-migration",
        },
    ),
}

PACKAGE: dict[str, Example] = {
    "task_and_project": Example(
        summary="A 4,000-token package for a task of the billing project",
        value={
            "task_id": "OPS-4812",
            "project_id": "billing-migration",
            "include_global": True,
            "budget_tokens": 4000,
            "shares": {"task": 0.5, "project": 0.3, "global": 0.2},
            "filters": {"importance": {"$gte": 0.3}},
        },
    ),
}

LEARNED: dict[str, Example] = {
    "optimised_planner": Example(
        summary="A DSPy optimisation run's results",
        value={
            "signatures": {"plan_migration": "context, goal -> steps, owners"},
            "demonstrations": [
                {
                    "goal": "move the invoices table",
                    "steps": [
                        "copy with logical replication",
                        "switch reads",
                        "freeze writes and switch",
                    ],
                }
            ],
            "tuned_prompts": {
                "plan_migration": "Plan in numbered steps; name the owner and the rollback of each."
            },
            "metadata": {"optimizer": "MIPROv2", "score": 0.87},
        },
    ),
}

ROLLBACK: dict[str, Example] = {
    "to_version": Example(summary="Make version 2 active again", value={"to_version": 2}),
}

ITEM_UPDATE: dict[str, Example] = {
    "correct_a_fact": Example(
        summary="Correct a fact (with If-Match: the version it corrects)",
        value={
            "text": "The user lives in Berlin.",
            "key": "user.home_city",
            "valid_from": "2026-02-01T00:00:00Z",
            "reason": "the user moved in February, not March",
        },
    ),
    "no_longer_true": Example(
        summary="A fact that stopped being true",
        value={"invalid_at": "2026-04-30T00:00:00Z", "reason": "the cat died"},
    ),
}

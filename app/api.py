"""The /v1 API: every domain router, each mounted on the app under one prefix.

The routers are included in the app directly, not through a `/v1` parent router: FastAPI
matches an included router's routes once to select it and again to dispatch, so every
level of nesting adds a pass over the route table to every request. For the same reason
the routers of the hot paths (context build, append, shared memory, search) come first:
a request is matched against every route of the routers before its own. The order shown in
the API docs is `TAGS`, not this one.
"""

from fastapi import APIRouter, FastAPI

from app.auth.router import router as auth_router
from app.context import lane as context_lane
from app.context.router import router as context_router
from app.core.edge import Lane
from app.erasure.router import router as erasure_router
from app.erasure.router import sessions_router as session_erasure_router
from app.erasure.router import users_router as user_erasure_router
from app.facts.router import router as facts_router
from app.jobs.router import router as jobs_router
from app.knowledge.router import router as knowledge_router
from app.manifests.router import router as manifests_router
from app.memory.router import router as memory_router
from app.messages import lane as messages_lane
from app.messages.router import router as messages_router
from app.portability.router import router as portability_router
from app.profiles.router import router as profiles_router
from app.search.router import router as search_router
from app.session_resource.router import router as sessions_router
from app.shared_memory.router import router as shared_memory_router
from app.tools.router import router as tools_router
from app.usage.router import router as usage_router
from app.users.router import router as users_router

PREFIX = "/v1"
ROUTERS: tuple[APIRouter, ...] = (
    context_router,
    messages_router,
    shared_memory_router,
    search_router,
    sessions_router,
    session_erasure_router,
    memory_router,
    auth_router,
    profiles_router,
    knowledge_router,
    facts_router,
    tools_router,
    jobs_router,
    users_router,
    user_erasure_router,
    erasure_router,
    portability_router,
    manifests_router,
    usage_router,
)

# the hot routes' shortcuts past FastAPI's routing to their endpoints (`app.core.edge`)
LANES: tuple[Lane, ...] = (
    Lane("POST", PREFIX + "/sessions/{session_id}/context", context_lane.handle),
    Lane("POST", PREFIX + "/sessions/{session_id}/messages", messages_lane.handle),
)

# the API docs' sections, in reading order
TAGS: list[dict[str, str]] = [
    {"name": "admin", "description": "Tenants and API keys (admin and service keys)."},
    {"name": "sessions", "description": "Conversations of one agent each."},
    {"name": "messages", "description": "Append to a session and read its full history."},
    {"name": "profiles", "description": "Agent profiles: the ROM new sessions freeze."},
    {
        "name": "memory",
        "description": "A session's segmented memory: L1/L2, compression, promotion, the Kernel.",
    },
    {"name": "context", "description": "The ready-to-send context, never over budget."},
    {
        "name": "knowledge",
        "description": "Task / project / global memory items, context packages, learned layers.",
    },
    {
        "name": "shared-memory",
        "description": "Shared data in namespaces, including "
        "agent-private memory; data references.",
    },
    {"name": "search", "description": "Search the swap: a session, an agent or the tenant."},
    {"name": "tools", "description": "Built-in tools an agent loop can offer its model."},
    {
        "name": "jobs",
        "description": "Background jobs (compression, fact extraction), the queue and the worker.",
    },
    {"name": "usage", "description": "What the LLM cost: tokens by day, purpose, model, user."},
    {"name": "health", "description": "Liveness, readiness and metrics."},
]


def include(app: FastAPI) -> None:
    """Every router under /v1 (each route refuses query parameters it does not declare:
    `app.core.query_params`, checked with the caller's key)."""
    for router in ROUTERS:
        app.include_router(router, prefix=PREFIX)

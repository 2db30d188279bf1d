"""The /v1 API: every domain router, each mounted on the app under one prefix.

The routers are included in the app directly, not through a `/v1` parent router: FastAPI
matches an included router's routes once to select it and again to dispatch, so every
level of nesting adds a pass over the route table to every request.
"""

from fastapi import APIRouter, FastAPI

from app.auth.router import router as auth_router
from app.context.router import router as context_router
from app.knowledge.router import router as knowledge_router
from app.memory.router import router as memory_router
from app.messages.router import router as messages_router
from app.profiles.router import router as profiles_router
from app.search.router import router as search_router
from app.sessions.router import router as sessions_router
from app.shared_memory.router import router as shared_memory_router
from app.tools.router import router as tools_router

PREFIX = "/v1"
ROUTERS: tuple[APIRouter, ...] = (auth_router, sessions_router, messages_router, profiles_router,
                                  memory_router, context_router, knowledge_router,
                                  shared_memory_router, search_router, tools_router)


def include(app: FastAPI) -> None:
    for router in ROUTERS:
        app.include_router(router, prefix=PREFIX)

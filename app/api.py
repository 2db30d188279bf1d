"""The /v1 API: every domain router, mounted under one prefix."""

from fastapi import APIRouter

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

api_router = APIRouter(prefix="/v1")
api_router.include_router(auth_router)
api_router.include_router(sessions_router)
api_router.include_router(messages_router)
api_router.include_router(profiles_router)
api_router.include_router(memory_router)
api_router.include_router(context_router)
api_router.include_router(knowledge_router)
api_router.include_router(shared_memory_router)
api_router.include_router(search_router)
api_router.include_router(tools_router)

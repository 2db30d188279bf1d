"""All table models, imported here so Alembic sees the whole metadata."""

from app.models.agent_profile import AgentProfile  # noqa: F401
from app.models.api_key import ApiKey
from app.models.base import metadata
from app.models.compression_job import CompressionJob  # noqa: F401
from app.models.context_manifest import ContextManifest  # noqa: F401
from app.models.erasure import Erasure  # noqa: F401
from app.models.fact import FactExtraction, MemoryItemVersion  # noqa: F401
from app.models.idempotency import IdempotencyRecord
from app.models.learned import LearnedHead, LearnedVersion  # noqa: F401
from app.models.llm_usage import LlmUsage, TenantBudget  # noqa: F401
from app.models.memory import MemoryState  # noqa: F401  (and the other memory tables)
from app.models.memory_item import MemoryItem  # noqa: F401
from app.models.message import Message
from app.models.search_stats import SearchStats  # noqa: F401
from app.models.search_terms import SearchTerm  # noqa: F401
from app.models.session import Session
from app.models.shared_memory_entry import SharedMemoryEntry, SharedMemoryRefHolder  # noqa: F401
from app.models.tenant import Tenant

__all__ = ["ApiKey", "IdempotencyRecord", "Message", "Session", "Tenant", "metadata"]

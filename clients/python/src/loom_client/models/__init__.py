"""Request and response models of the Loom Memory API (pydantic v2)."""

from loom_client.models._base import Page, RequestModel, ResponseModel
from loom_client.models.auth import (
    ApiKey,
    ApiKeyCreated,
    ApiKeyList,
    Readiness,
    Role,
    Tenant,
    WhoAmI,
)
from loom_client.models.context import (
    CompressionState,
    ContextDiff,
    ContextList,
    ContextManifest,
    ContextReplay,
    ContextResponse,
    ContextSummary,
    Recall,
    RecallHit,
)
from loom_client.models.knowledge import (
    ClearResult,
    ContextPackage,
    ExtractResult,
    FactExtraction,
    Learned,
    MemoryItem,
    MemoryItemHistory,
    MemoryItemList,
    MemoryItemVersion,
    OrderBy,
    PackageItem,
    Profile,
    TaskCompleteResult,
    TierUsage,
)
from loom_client.models.memory import (
    Cleared,
    CompressionJob,
    CompressResult,
    JobList,
    JobListed,
    Kernel,
    KernelSchema,
    Memory,
    PromoteResult,
    PromoteSkip,
    QueueStatus,
    Snapshot,
    SnapshotList,
    Summary,
    ToolDefinition,
)
from loom_client.models.search import QueryDate, SearchHit, SearchResult
from loom_client.models.sessions import (
    LayerTokens,
    Message,
    MessageIn,
    MessageList,
    MessagesAppended,
    RecallInput,
    RomInput,
    Session,
    SessionConfig,
    SessionKnowledgeConfig,
    SessionList,
    TierShares,
)
from loom_client.models.shared_memory import (
    DataReference,
    Namespace,
    NamespaceStats,
    SharedMemoryBlob,
    SharedMemoryEntry,
    SharedMemoryKey,
    SharedMemoryKeyList,
    SharedMemoryStats,
)
from loom_client.models.tools import (
    AnthropicTool,
    OpenAIFunction,
    OpenAITool,
    ToolList,
    ToolResult,
)
from loom_client.models.usage import Budget, UsageGroup, UsageGroupBy, UsageReport
from loom_client.models.users import Erasure, ErasureList, ImportResult, User, UserList
from loom_client.models.watch import (
    ClosedEvent,
    DeleteEvent,
    DroppedEvent,
    HeartbeatEvent,
    PutEvent,
    ReadyEvent,
    UnknownEvent,
    WatchEvent,
)

__all__ = [
    "AnthropicTool", "ApiKey", "ApiKeyCreated", "ApiKeyList", "ClearResult", "Cleared",
    "ClosedEvent", "CompressResult", "CompressionJob", "CompressionState", "ContextPackage",
    "ContextDiff", "ContextList", "ContextManifest", "ContextReplay", "ContextResponse",
    "ContextSummary", "DataReference", "DeleteEvent", "DroppedEvent", "ExtractResult",
    "FactExtraction", "HeartbeatEvent", "JobList", "JobListed",
    "Kernel", "KernelSchema", "LayerTokens", "Learned", "Memory", "MemoryItem",
    "MemoryItemHistory", "MemoryItemList", "MemoryItemVersion", "Message", "MessageIn",
    "MessageList", "MessagesAppended", "Namespace",
    "NamespaceStats", "OpenAIFunction", "OpenAITool", "OrderBy", "PackageItem", "Page",
    "Profile", "PromoteResult", "PromoteSkip", "PutEvent", "QueryDate", "QueueStatus", "ReadyEvent",
    "Readiness", "Recall", "RecallHit", "RecallInput", "RequestModel", "ResponseModel",
    "Role", "RomInput", "SearchHit", "SearchResult", "Session", "SessionConfig",
    "SessionKnowledgeConfig", "SessionList", "SharedMemoryBlob", "SharedMemoryEntry",
    "SharedMemoryKey", "SharedMemoryKeyList", "SharedMemoryStats", "Snapshot",
    "SnapshotList", "Summary", "TaskCompleteResult", "Tenant", "TierShares", "TierUsage",
    "ToolDefinition", "ToolList", "ToolResult", "UnknownEvent", "WatchEvent", "WhoAmI",
    "User", "UserList", "Erasure", "ErasureList", "ImportResult",
    "Budget", "UsageGroup", "UsageGroupBy", "UsageReport",
]

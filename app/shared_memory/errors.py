"""Shared-memory errors; each maps to one status and one stable error code."""

from app.core.errors import (
    AppError,
    BadRequest,
    Conflict,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    PreconditionRequired,
)


class InvalidKey(BadRequest):
    code = "invalid_key"


class InvalidScope(BadRequest):
    code = "invalid_scope"


class AgentRequired(BadRequest):
    """The `agent` namespace needs an authenticated agent (agent key or X-Agent-Id)."""

    code = "agent_id_required"


class EntryNotFound(NotFound):
    code = "entry_not_found"


class RefNotFound(NotFound):
    code = "ref_not_found"


class VersionConflict(Conflict):
    code = "version_conflict"


class EntryPreconditionFailed(PreconditionFailed):
    code = "precondition_failed"


class IfMatchRequired(PreconditionRequired):
    code = "if_match_required"


class ValueTooLarge(PayloadTooLarge):
    code = "value_too_large"


class IntegrityError(AppError):
    """Stored bytes no longer match their SHA-256: never served, always reported.

    500-class on purpose: the request was fine, the stored data is not. The handler
    renders it as the usual envelope without a stack trace.
    """

    status_code = 500
    code = "integrity_error"

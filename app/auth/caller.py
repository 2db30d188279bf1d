"""Who is calling, and what they may do (pure rules)."""

import re
import uuid
from dataclasses import dataclass
from typing import Literal

from app.auth.schemas import AGENT_ID_PATTERN
from app.core.errors import BadRequest, Forbidden

Role = Literal["admin", "service", "agent"]
ROLES: tuple[str, ...] = ("admin", "service", "agent")


@dataclass(frozen=True)
class Caller:
    """An authenticated caller acting in one tenant.

    `agent_id` is the effective agent: an agent key's bound id, or the `X-Agent-Id` a service
    or admin key sent; None when a service acts without naming an agent.
    """

    tenant_id: uuid.UUID
    role: Role
    agent_id: str | None
    key_id: uuid.UUID | None

    def require_agent(self) -> str:
        """The agent this call acts as; service keys must name one with X-Agent-Id."""
        if not self.agent_id:
            raise BadRequest(
                "This operation acts as an agent: send X-Agent-Id.", code="agent_required"
            )
        return self.agent_id

    def require_role(self, *roles: str) -> None:
        if self.role not in roles:
            raise Forbidden(f"This operation needs a key with role {' or '.join(roles)}.")

    def can_see_agent(self, agent_id: str) -> bool:
        """Agent keys see only their own agent; service and admin keys see the tenant."""
        return self.role != "agent" or self.agent_id == agent_id

    def require_agent_access(self, agent_id: str | None) -> None:
        """403 `agent_mismatch` when an agent key names another agent (None names none)."""
        if agent_id is not None and not self.can_see_agent(agent_id):
            raise AgentMismatch()


# One agent-id rule for the X-Agent-Id header, body fields and paths (AGENT_ID_PATTERN).
_AGENT_ID_RE = re.compile(AGENT_ID_PATTERN)


class InvalidAgentId(BadRequest):
    code = "invalid_agent_id"

    def __init__(self, where: str) -> None:
        super().__init__(
            f"{where} is not a valid agent id: 1-200 characters, letters, digits "
            "and _ . : @ -, starting with a letter or digit.",
            details=[{"loc": where.split("."), "pattern": AGENT_ID_PATTERN}],
        )


def check_agent_id(value: str, where: str) -> str:
    """`value` if it is a valid agent id, else 400 `invalid_agent_id` naming `where`."""
    if not _AGENT_ID_RE.fullmatch(value):
        raise InvalidAgentId(where)
    return value


class AgentMismatch(Forbidden):
    """An agent key asked to act as, or read, another agent."""

    code = "agent_mismatch"

    def __init__(self) -> None:
        super().__init__("This key is bound to another agent.")


def effective_agent(role: str, bound_agent: str | None, header_agent: str | None) -> str | None:
    """Resolve X-Agent-Id against the key: an agent key may not act as another agent."""
    if role == "agent":
        if header_agent is not None and header_agent != bound_agent:
            raise AgentMismatch()
        return bound_agent
    return header_agent or None

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}$"


class TenantCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    text_search_config: Literal["english", "simple"] = "english"


class TenantPublic(BaseModel):
    id: uuid.UUID
    name: str
    text_search_config: str
    created_at: datetime


class ApiKeyCreate(BaseModel):
    # agent_id: required for role agent, absent (or null) for the other roles.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"role": {"const": "agent"}}, "required": ["role"]},
            "then": {"required": ["agent_id"], "properties": {"agent_id": {"type": "string"}}},
            "else": {"properties": {"agent_id": {"type": "null"}}},
        }
    )

    tenant_id: uuid.UUID | None = Field(
        default=None, description="Tenant of the key; defaults to the caller's tenant."
    )
    role: Literal["admin", "service", "agent"]
    agent_id: str | None = Field(
        default=None,
        pattern=AGENT_ID_PATTERN,
        description="Required for role agent (the key acts only as it); "
        "refused for the other roles.",
    )
    name: str = Field(default="", max_length=200)

    @model_validator(mode="after")
    def _agent_binding(self) -> "ApiKeyCreate":
        if self.role == "agent" and not self.agent_id:
            raise ValueError("an agent key needs agent_id")
        if self.role != "agent" and self.agent_id:
            raise ValueError("only agent keys are bound to an agent_id")
        return self


class ApiKeyPublic(BaseModel):
    id: uuid.UUID
    tenant_id: uuid.UUID
    role: str
    agent_id: str | None
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyPublic):
    secret: str = Field(description="The key itself. Shown once; only its hash is stored.")


class ApiKeyList(BaseModel):
    items: list[ApiKeyPublic]
    next_cursor: str | None


class WhoAmI(BaseModel):
    """The key behind a request: what the caller may do and as whom."""

    role: Literal["admin", "service", "agent"]
    tenant_id: str | None = Field(
        description="The key's tenant, or the one an admin key "
        "names with X-Tenant-Id; null for the bootstrap admin key "
        "without the header."
    )
    agent_id: str | None = Field(
        description="An agent key's agent, or the X-Agent-Id a service or admin key sent."
    )
    key_id: str | None = Field(description="null for the bootstrap admin key (LOOM_ADMIN_KEY).")

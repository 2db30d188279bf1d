"""Tenants and API keys (admin; service keys may mint agent keys for their tenant)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from loom_client.models._base import Page, ResponseModel

Role = Literal["admin", "service", "agent"]


class Tenant(ResponseModel):
    id: str
    name: str
    text_search_config: str
    created_at: datetime


class ApiKey(ResponseModel):
    id: str
    tenant_id: str
    role: str
    agent_id: str | None
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(ApiKey):
    secret: str
    """The key itself: shown in this response only (the server keeps its hash)."""


class ApiKeyList(Page):
    items: list[ApiKey]


class Readiness(ResponseModel):
    status: str
    checks: dict[str, str]


class WhoAmI(ResponseModel):
    """The calling key: role, tenant (None for the bootstrap admin key without X-Tenant-Id),
    the agent it acts as, and its id (None for the bootstrap admin key)."""

    role: str
    tenant_id: str | None = None
    agent_id: str | None = None
    key_id: str | None = None

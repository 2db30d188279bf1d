"""Queries for tenants and API keys, all of them SQL on an asyncpg connection: the request's
key lookup on the hot paths' pool (`app.core.pg`), the administration on the route's connection
(`app.auth.deps.DbDep`, in its transaction). Rows
come back as `TenantRow` and `ApiKeyRow`, whose select lists come from the table models; no
ORM instance is read or built.

`tenants` and `api_keys` are the two global tables (a key is looked up before its tenant is
known); a key's statements still name its tenant where it is known.
"""

import uuid
from datetime import datetime

import asyncpg

from app.core.pg import positional
from app.models.api_key import API_KEY_ROW_COLUMNS, ApiKeyRow
from app.models.tenant import TENANT_ROW_COLUMNS, TenantRow

_TENANT = ", ".join(TENANT_ROW_COLUMNS)
_KEY = ", ".join(API_KEY_ROW_COLUMNS)

# Every request resolves its key: on the hot paths' asyncpg pool (`app.core.pg`), as a
# prepared statement, when the per-process key cache does not have it.
_TENANT_EXISTS = "SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)"


async def key_by_hash(conn: asyncpg.Connection, key_hash: str) -> ApiKeyRow | None:
    """The key with this hash (a request's lookup, once per key per process with the key
    cache on)."""
    row = await conn.fetchrow(_KEY_BY_HASH, key_hash)
    return None if row is None else ApiKeyRow._make(row)


async def tenant_exists(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> bool:
    return bool(await conn.fetchval(_TENANT_EXISTS, tenant_id))


_GET_TENANT = f"SELECT {_TENANT} FROM tenants WHERE id = $1"
_TENANT_BY_NAME = f"SELECT {_TENANT} FROM tenants WHERE name = $1"


async def get_tenant(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> TenantRow | None:
    row = await conn.fetchrow(_GET_TENANT, tenant_id)
    return None if row is None else TenantRow._make(row)


async def get_tenant_by_name(conn: asyncpg.Connection, name: str) -> TenantRow | None:
    row = await conn.fetchrow(_TENANT_BY_NAME, name)
    return None if row is None else TenantRow._make(row)


# a tenant row is its own tenant: `tenant_id` is its id
_ADD_TENANT = f"""
INSERT INTO tenants (id, tenant_id, name, text_search_config, created_at)
VALUES ($1, $1, $2, $3, $4)
RETURNING {_TENANT}
"""


async def add_tenant(
    conn: asyncpg.Connection,
    *,
    tenant_id: uuid.UUID,
    name: str,
    text_search_config: str,
    created_at: datetime,
) -> TenantRow:
    """Insert a tenant (a name that exists fails the statement: `UniqueViolationError`)."""
    row = await conn.fetchrow(_ADD_TENANT, tenant_id, name, text_search_config, created_at)
    assert row is not None  # RETURNING the inserted row
    return TenantRow._make(row)


_ADD_KEY = f"""
INSERT INTO api_keys (id, tenant_id, name, role, agent_id, key_hash, prefix, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING {_KEY}
"""


async def add_key(
    conn: asyncpg.Connection,
    *,
    key_id: uuid.UUID,
    tenant_id: uuid.UUID,
    name: str,
    role: str,
    agent_id: str | None,
    key_hash: str,
    prefix: str,
    created_at: datetime,
) -> ApiKeyRow:
    row = await conn.fetchrow(
        _ADD_KEY, key_id, tenant_id, name, role, agent_id, key_hash, prefix, created_at
    )
    assert row is not None  # RETURNING the inserted row
    return ApiKeyRow._make(row)


def _list_sql(by_role: bool, after: bool) -> str:
    # one statement per filter combination, each numbering only the parameters it takes
    # (`pg.positional`)
    where = ["tenant_id = :tenant"]
    if by_role:
        where.append("role = :role")
    if after:
        where.append("id > :after")
    sql = f"SELECT {_KEY} FROM api_keys WHERE {' AND '.join(where)} ORDER BY id LIMIT :limit"
    return positional(sql)[0]


# every filter combination's statement, written once at import
_LIST_SQL = {(r, a): _list_sql(r, a) for r in (False, True) for a in (False, True)}


async def list_keys(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    *,
    after: uuid.UUID | None,
    limit: int,
    role: str | None = None,
) -> list[ApiKeyRow]:
    """The tenant's keys (of one role) in id order, after the cursor `after`."""
    args: list[object] = [tenant_id]
    if role:
        args.append(role)
    if after:
        args.append(after)
    rows = await conn.fetch(_LIST_SQL[bool(role), bool(after)], *args, limit)
    return [ApiKeyRow._make(r) for r in rows]


_GET_KEY = f"SELECT {_KEY} FROM api_keys WHERE tenant_id = $1 AND id = $2"
_KEY_BY_HASH = f"SELECT {_KEY} FROM api_keys WHERE key_hash = $1"


async def get_key(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, key_id: uuid.UUID
) -> ApiKeyRow | None:
    row = await conn.fetchrow(_GET_KEY, tenant_id, key_id)
    return None if row is None else ApiKeyRow._make(row)


_REVOKE_KEY = """
UPDATE api_keys SET revoked_at = $3
WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL
"""


async def revoke_key(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, key_id: uuid.UUID, at: datetime
) -> None:
    """Revoke the key `at` (a key revoked already keeps its moment)."""
    await conn.execute(_REVOKE_KEY, tenant_id, key_id, at)

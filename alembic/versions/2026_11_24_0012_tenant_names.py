"""Tenant names are unique per deployment.

`POST /v1/tenants` with a name that exists answers 409 `tenant_exists` (with the existing
tenant's id), and `loom-memory create-key --tenant-name` finds the tenant by its name. A
deployment that already has tenants sharing a name keeps the oldest under the name; the
others get their id appended ("acme (3f1c...)") before the constraint is added.

Revision ID: 0012_tenant_names
Revises: 0011_scoped_search_index
Create Date: 2026-11-24 20:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012_tenant_names"
down_revision: str | Sequence[str] | None = "0011_scoped_search_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # 161 + len(" (<uuid>)") = 200, the column's length
    op.execute("""
        UPDATE tenants t SET name = left(t.name, 161) || ' (' || t.id::text || ')'
        FROM (SELECT id, row_number() OVER (PARTITION BY name ORDER BY created_at, id) AS n
              FROM tenants) d
        WHERE d.id = t.id AND d.n > 1
    """)
    op.create_unique_constraint(op.f("uq_tenants_name"), "tenants", ["name"])


def downgrade() -> None:
    op.drop_constraint(op.f("uq_tenants_name"), "tenants", type_="unique")

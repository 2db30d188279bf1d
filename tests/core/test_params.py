"""`app.core.pg.Params`: statements composed from parts, numbered for asyncpg."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from app.core import pg
from app.knowledge.repository import readable_sql, scope_sql
from app.knowledge.scopes import Scope


def test_parts_share_a_name_for_one_value_and_number_in_order() -> None:
    p = pg.Params()
    tenant = uuid.uuid4()
    a = p.add(tenant, "tenant_id")
    b = p.add(tenant, "tenant_id")
    c = p.add(uuid.uuid4(), "tenant_id")
    assert a == b == ":tenant_id" and c != a
    statement, *args = p.sql(f"SELECT 1 WHERE x = {c} AND y = {a} AND z = {a}::uuid")
    assert statement == "SELECT 1 WHERE x = $1 AND y = $2 AND z = $2::uuid"
    assert args == [p.values[c[1:]], tenant]


def test_equal_values_of_other_types_get_their_own_names() -> None:
    p = pg.Params()
    assert p.add(1, "v") != p.add(True, "v")
    assert p.add("1", "v") != p.add(1, "v")


@given(st.lists(st.one_of(st.integers(), st.text(max_size=3)), max_size=12))
def test_every_added_value_comes_back_at_its_place(values: list[object]) -> None:
    p = pg.Params()
    names = [p.add(v, "v") for v in values]
    statement, *args = p.sql(" ".join(names))
    order = [int(n[1:]) for n in statement.split()] if values else []
    assert [args[i - 1] for i in order] == values


def test_readable_for_an_agent_key_and_for_no_agent() -> None:
    p = pg.Params()
    tenant = uuid.uuid4()
    sql = readable_sql(p, tenant, "a1", include_invalidated=False)
    assert "m.scope_id = :agent_id" in sql and "ks.agent_id = :agent_id" in sql
    assert sql.endswith("m.invalid_at IS NULL")
    assert p.values == {"tenant_id": tenant, "agent_id": "a1"}
    none = readable_sql(pg.Params(), tenant, None)
    assert "m.scope_kind <> 'agent'" in none and "(m.scope_kind <> 'user' OR false)" in none
    assert "scope_kind <> 'user'" not in readable_sql(pg.Params(), tenant, None, every_user=True)


def test_scopes_of_one_statement_get_names_of_their_own() -> None:
    p = pg.Params()
    one = scope_sql(p, Scope("task", "t1"))
    two = scope_sql(p, Scope("project", "p1"))
    statement, *args = p.sql(f"{one} OR {two}")
    assert args == ["task", "t1", "project", "p1"]
    assert scope_sql(pg.Params(), Scope("user")) == "m.scope_kind = :scope_kind"

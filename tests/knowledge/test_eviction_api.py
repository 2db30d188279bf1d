"""Project eviction past max_items (default 1,000): the 1,001st insert evicts exactly the
lowest-importance, oldest 10% (100 items), as the seed's ProjectMemoryStore does."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import col

from app.models.base import table_of
from app.models.memory_item import MemoryItem


async def _seed(db, tenant_id: uuid.UUID, project: str, n: int) -> list[dict[str, Any]]:
    rng = random.Random(8)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows: list[dict[str, Any]] = [
        {
            "id": uuid.uuid4(),
            "tenant_id": tenant_id,
            "scope_kind": "project",
            "scope_id": project,
            "kind": "note",
            "source": "seed",
            "tags": [],
            # few distinct importances so age must break ties
            "importance": rng.choice([0.1, 0.2, 0.5, 0.9]),
            "text": f"n{i}",
            "payload": None,
            "token_cost": 5,
            "created_at": t0 + timedelta(seconds=rng.randrange(100_000)),
            "updated_at": t0,
        }
        for i in range(n)
    ]
    await db.execute(sa.insert(table_of(MemoryItem)), rows)
    await db.commit()
    return rows


async def _project_ids(db, tenant_id: uuid.UUID, project: str) -> set[uuid.UUID]:
    result = await db.execute(
        sa.select(col(MemoryItem.id)).where(
            col(MemoryItem.tenant_id) == tenant_id,
            col(MemoryItem.scope_kind) == "project",
            col(MemoryItem.scope_id) == project,
        )
    )
    return set(result.scalars())


async def test_1001st_item_evicts_lowest_importance_oldest_10_percent(client, tenant, db) -> None:
    tid = uuid.UUID(tenant.id)
    rows = await _seed(db, tid, "big", 1000)
    other = await _seed(db, tid, "small", 5)  # another project is untouched
    r = await client.post(
        "/v1/memory-items",
        json={"scope": "project/big", "kind": "decision", "text": "new", "importance": 0.95},
    )
    assert r.status_code == 201, r.text
    new_id = uuid.UUID(r.json()["id"])
    everything = [(row["importance"], row["created_at"], str(row["id"]), row["id"]) for row in rows]
    expected_evicted = {t[3] for t in sorted(everything)[:100]}
    remaining = await _project_ids(db, tid, "big")
    assert len(remaining) == 901
    assert new_id in remaining
    assert remaining == ({row["id"] for row in rows} - expected_evicted) | {new_id}
    assert await _project_ids(db, tid, "small") == {row["id"] for row in other}


async def test_at_max_items_nothing_is_evicted(client, tenant, db) -> None:
    tid = uuid.UUID(tenant.id)
    await _seed(db, tid, "full", 999)
    r = await client.post(
        "/v1/memory-items", json={"scope": "project/full", "kind": "decision", "text": "new"}
    )
    assert r.status_code == 201
    assert len(await _project_ids(db, tid, "full")) == 1000

"""Where a subject could still be: every row of every table, every Redis key and value."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


async def table_hits(db: Any, needles: list[str]) -> dict[str, int]:
    """table -> rows holding any needle, in any column (text form; bytea columns as bytes)."""
    tables = (
        (
            await db.execute(
                sa.text(
                    "SELECT c.relname FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') "
                    "AND NOT c.relispartition ORDER BY 1"
                )
            )
        )
        .scalars()
        .all()
    )
    hits: dict[str, int] = {}
    for t in tables:
        binary = (
            (
                await db.execute(
                    sa.text(
                        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                        "current_schema() AND table_name = :t AND data_type = 'bytea'"
                    ),
                    {"t": t},
                )
            )
            .scalars()
            .all()
        )
        conds = []
        params: dict[str, Any] = {}
        for i, needle in enumerate(needles):
            params[f"n{i}"] = needle
            conds.append(f"strpos(x::text, :n{i}) > 0")
            conds += [f"position(convert_to(:n{i}, 'UTF8') in x.{c}) > 0" for c in binary]
        n = (
            await db.execute(
                sa.text(f"SELECT count(*) FROM {t} x WHERE {' OR '.join(conds)}"), params
            )
        ).scalar_one()
        if n:
            hits[t] = int(n)
    return hits


async def redis_hits(redis: Any, needles: list[str]) -> list[str]:
    """Keys whose name or value holds any needle."""
    raw = [n.encode() for n in needles]
    found = []
    async for key in redis.scan_iter(count=1000):
        kind = (
            (await redis.type(key)).decode()
            if isinstance(await redis.type(key), bytes)
            else await redis.type(key)
        )
        parts: list[bytes] = [key]
        if kind == "string":
            parts.append(await redis.get(key) or b"")
        elif kind == "hash":
            for f, v in (await redis.hgetall(key)).items():
                parts += [f, v]
        elif kind == "list":
            parts += await redis.lrange(key, 0, -1)
        elif kind == "set":
            parts += list(await redis.smembers(key))
        elif kind == "zset":
            parts += await redis.zrange(key, 0, -1)
        blob = b"\0".join(p if isinstance(p, bytes) else str(p).encode() for p in parts)
        if any(n in blob for n in raw):
            found.append(key.decode() if isinstance(key, bytes) else key)
    return found
